//! Optional password authentication (`braid server --password`): PostgreSQL's MD5
//! challenge, so the password never crosses the wire in clear. Without a password
//! every client is let in (the server binds loopback unless told otherwise).

use async_trait::async_trait;
use futures::Sink;
use pgwire::api::auth::md5pass::{hash_md5_password, Md5PasswordAuthStartupHandler};
use pgwire::api::auth::{
    AuthSource, DefaultServerParameterProvider, LoginInfo, Password, StartupHandler,
};
use pgwire::api::{ClientInfo, NoopHandler};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use std::fmt::Debug;
use std::sync::Arc;

/// The server's one password (any user name).
#[derive(Debug)]
pub(crate) struct Secret(String);

#[async_trait]
impl AuthSource for Secret {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let salt = salt();
        let user = login.user().unwrap_or_default();
        let hashed = hash_md5_password(user, &self.0, &salt);
        Ok(Password::new(Some(salt.to_vec()), hashed.into_bytes()))
    }
}

/// Four bytes no client can guess ahead.
fn salt() -> [u8; 4] {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (h.finish() as u32).to_le_bytes()
}

/// How clients are let in.
pub(crate) enum Startup {
    /// Everyone.
    Open(NoopHandler),
    /// With the password.
    Md5(Md5PasswordAuthStartupHandler<Secret, DefaultServerParameterProvider>),
}

impl Startup {
    pub(crate) fn new(password: Option<&str>) -> Startup {
        match password {
            None => Startup::Open(NoopHandler),
            Some(p) => Startup::Md5(Md5PasswordAuthStartupHandler::new(
                Arc::new(Secret(p.to_string())),
                Arc::new(DefaultServerParameterProvider::default()),
            )),
        }
    }
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match self {
            Startup::Open(h) => h.on_startup(client, message).await,
            Startup::Md5(h) => h.on_startup(client, message).await,
        }
    }
}
