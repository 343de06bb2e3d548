//! Braid's checkpoints on S3-compatible object storage: a
//! [`CheckpointBackend`](braid_exec::checkpoint_store::CheckpointBackend) over the
//! `object_store` crate, for `s3://bucket/prefix` URLs, so that the processes of a run
//! on several machines checkpoint into one place.
//!
//! Configuration comes from the standard AWS environment variables
//! (`AmazonS3Builder::from_env`): `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, `AWS_REGION` (or `AWS_DEFAULT_REGION`; `us-east-1` when
//! neither is set), `AWS_ENDPOINT_URL` or `AWS_ENDPOINT` for an S3-compatible server
//! (MinIO, Ceph, s3proxy, ...; requests are then path-style, `endpoint/bucket/key`), and
//! `AWS_ALLOW_HTTP=true` for an `http://` endpoint.
//!
//! Commit on object storage: each part is one PUT (atomic: an object is all there or
//! not there), then the manifest, then `LATEST`, each one PUT; nothing is renamed, and
//! a PUT is durable once it returns, so there is nothing to sync. A checkpoint without
//! a manifest does not exist, as in a directory.
//!
//! This crate owns a small current-thread tokio runtime and blocks on it: the store is
//! called from the dataflow's worker threads and its committer, which are not async.
//! It is a crate of its own so that `braid-exec` does not depend on an HTTP and async
//! stack; the `braid` command line depends on it.

use braid_exec::checkpoint_store::CheckpointBackend;
use braid_exec::error::{Error, Result};
use futures::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload};
use std::future::Future;
use std::sync::Arc;

/// Whether `location` (a `--checkpoint` or `--recover` argument) names object storage
/// rather than a directory.
pub fn is_url(location: &str) -> bool {
    location.starts_with("s3://")
}

/// Checkpoints under `s3://bucket/prefix`.
#[derive(Clone)]
pub struct S3Backend {
    bucket: String,
    /// Keys' common prefix in the bucket, without a slash at either end ("" for none).
    prefix: String,
    store: Arc<AmazonS3>,
    runtime: Arc<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for S3Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Backend")
            .field("url", &self.location())
            .finish()
    }
}

impl S3Backend {
    /// The store at `url` (`s3://bucket/prefix`), configured from the AWS environment
    /// variables (see the crate's documentation).
    pub fn from_env(url: &str) -> Result<S3Backend> {
        S3Backend::build(url, AmazonS3Builder::from_env(), &[])
    }

    /// The store at `url`, configured by `options` only (the environment is not read):
    /// keys as the environment variables' names in lower case (`aws_access_key_id`,
    /// `aws_secret_access_key`, `aws_region`, `aws_endpoint`, `aws_allow_http`, ...).
    pub fn with_options(url: &str, options: &[(&str, &str)]) -> Result<S3Backend> {
        S3Backend::build(url, AmazonS3Builder::new(), options)
    }

    fn build(
        url: &str,
        mut builder: AmazonS3Builder,
        options: &[(&str, &str)],
    ) -> Result<S3Backend> {
        let bad = |what: String| {
            Error::io(
                format!("checkpoint location {url}"),
                std::io::Error::new(std::io::ErrorKind::InvalidInput, what),
            )
        };
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| bad("expected s3://bucket/prefix".into()))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("no bucket: expected s3://bucket/prefix".into()));
        }
        let prefix = prefix.trim_matches('/').to_string();
        let ok = |c: char| c.is_ascii_alphanumeric() || "-_.=+,@/".contains(c);
        let bad_segment = !prefix.is_empty()
            && prefix
                .split('/')
                .any(|s| s.is_empty() || s == "." || s == "..");
        if !prefix.chars().all(ok) || bad_segment {
            return Err(bad(format!(
                "the prefix `{prefix}` may hold only letters, digits and `-_.=+,@`, in segments separated by single `/` (no `.` or `..` segment)"
            )));
        }
        for (key, value) in options {
            let key: AmazonS3ConfigKey = key
                .parse()
                .map_err(|e| bad(format!("option `{key}`: {e}")))?;
            builder = builder.with_config(key, *value);
        }
        builder = builder.with_bucket_name(bucket);
        if builder
            .get_config_value(&AmazonS3ConfigKey::Endpoint)
            .is_some()
        {
            // An S3-compatible server: `endpoint/bucket/key`.
            builder = builder.with_virtual_hosted_style_request(false);
        }
        let store = builder
            .build()
            .map_err(|e| Error::io(format!("configuring {url}"), std::io::Error::other(e)))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io(format!("starting the I/O runtime for {url}"), e))?;
        Ok(S3Backend {
            bucket: bucket.to_string(),
            prefix,
            store: Arc::new(store),
            runtime: Arc::new(runtime),
        })
    }

    /// The object path of `key`.
    fn full(&self, key: &str) -> String {
        match self.prefix.is_empty() {
            true => key.to_string(),
            false => format!("{}/{key}", self.prefix),
        }
    }

    /// The URL of `key`, for messages.
    fn url(&self, key: &str) -> String {
        format!("s3://{}/{}", self.bucket, self.full(key))
    }

    /// An error of `what` (`writing`, `reading`, ...) on `key`.
    fn error(&self, what: &str, key: &str, e: object_store::Error) -> Error {
        Error::io(
            format!("{what} {}", self.url(key)),
            std::io::Error::other(e),
        )
    }

    /// Runs `f` to its end on the runtime (on a thread of its own when the caller is
    /// inside another tokio runtime, where blocking on this one is not allowed).
    fn block<F>(&self, f: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.runtime.block_on(f);
        }
        std::thread::scope(|s| {
            s.spawn(|| self.runtime.block_on(f))
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// The objects whose path starts with the string `full` (a partial last segment
    /// too: object_store lists whole segments).
    fn matching(&self, full: &str) -> Result<Vec<Path>, object_store::Error> {
        let dir = full
            .rfind('/')
            .map(|i| &full[..i])
            .filter(|d| !d.is_empty())
            .map(Path::from);
        let all: Vec<_> = self.block(self.store.list(dir.as_ref()).try_collect())?;
        let mut out: Vec<Path> = all
            .into_iter()
            .map(|m| m.location)
            .filter(|p| p.as_ref().starts_with(full))
            .collect();
        out.sort();
        Ok(out)
    }
}

impl CheckpointBackend for S3Backend {
    fn location(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }

    fn child(&self, name: &str) -> Arc<dyn CheckpointBackend> {
        Arc::new(S3Backend {
            prefix: self.full(name.trim_matches('/')),
            ..self.clone()
        })
    }

    fn prepare(&self) -> Result<()> {
        // One listing: a bucket that is not there, or credentials it refuses, fail here.
        let dir = (!self.prefix.is_empty()).then(|| Path::from(self.prefix.as_str()));
        self.block(self.store.list_with_delimiter(dir.as_ref()))
            .map(|_| ())
            .map_err(|e| self.error("listing", "", e))
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let path = Path::from(self.full(key));
        let payload = PutPayload::from(bytes.to_vec());
        self.block(self.store.put(&path, payload))
            .map(|_| ())
            .map_err(|e| self.error("writing", key, e))
    }

    fn sync(&self, _prefix: &str) -> Result<()> {
        // A PUT is durable once it returns.
        Ok(())
    }

    fn replace(&self, key: &str, bytes: &[u8]) -> Result<()> {
        // A PUT replaces an object atomically: readers see the old one or the new one.
        self.put(key, bytes)
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let path = Path::from(self.full(key));
        let got = self.block(async {
            match self.store.get(&path).await {
                Ok(r) => r.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        });
        got.map(|b| b.map(|b| b.to_vec()))
            .map_err(|e| self.error("reading", key, e))
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let skip = match self.prefix.is_empty() {
            true => 0,
            false => self.prefix.len() + 1,
        };
        let found = self
            .matching(&self.full(prefix))
            .map_err(|e| self.error("listing", prefix, e))?;
        Ok(found
            .into_iter()
            .map(|p| p.as_ref()[skip..].to_string())
            .collect())
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = Path::from(self.full(key));
        match self.block(self.store.delete(&path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error("deleting", key, e)),
        }
    }

    fn delete_prefix(&self, prefix: &str) -> Result<()> {
        let found = self
            .matching(&self.full(prefix))
            .map_err(|e| self.error("listing", prefix, e))?;
        for path in found {
            match self.block(self.store.delete(&path)) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => {
                    return Err(Error::io(
                        format!("deleting s3://{}/{path}", self.bucket),
                        std::io::Error::other(e),
                    ))
                }
            }
        }
        Ok(())
    }
}
