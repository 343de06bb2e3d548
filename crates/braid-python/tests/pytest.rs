//! Runs the Python package's own tests (tests/test_braid.py, pytest) from `cargo test`.
//!
//! With `BRAID_PYTHON` set (`.ci/run` sets it), that interpreter runs them against the
//! `braid` package installed in it: the wheel maturin built. Without it, `python3` runs
//! them against this build's library, put where `import braid` finds it. Either way
//! pytest, pyarrow and pandas must be installed (`pip install pytest pyarrow pandas`):
//! their absence fails the test, it is never skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory of this build's libraries (`target/debug`).
fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    // target/debug/deps/pytest-<hash>
    exe.parent()
        .and_then(Path::parent)
        .expect("target directory")
        .to_path_buf()
}

#[test]
fn the_python_package_passes_its_tests() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (python, path) = match std::env::var_os("BRAID_PYTHON") {
        Some(p) => (PathBuf::from(p), None),
        None => {
            // A package directory: braid/__init__.py and braid/_braid.so (this build's
            // library, which links the same libpython the interpreter runs).
            let dir = build_dir().join("python-package");
            let pkg = dir.join("braid");
            std::fs::create_dir_all(&pkg).unwrap();
            std::fs::copy(
                crate_dir.join("python/braid/__init__.py"),
                pkg.join("__init__.py"),
            )
            .unwrap();
            // `cargo test` builds the cdylib into deps/ (it does not copy it up).
            let lib = build_dir().join("deps").join("libbraid_python.so");
            assert!(lib.exists(), "{} is not built", lib.display());
            std::fs::copy(&lib, pkg.join("_braid.so")).unwrap();
            (PathBuf::from("python3"), Some(dir))
        }
    };
    let mut cmd = Command::new(&python);
    cmd.args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(crate_dir.join("tests"))
        .current_dir(std::env::temp_dir());
    if let Some(dir) = &path {
        cmd.env("PYTHONPATH", dir);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(
        !text.contains("No module named pytest"),
        "{} has no pytest: pip install pytest pyarrow pandas",
        python.display()
    );
    assert!(out.status.success(), "pytest failed:\n{text}");
    // Every test ran: none was skipped for a missing pyarrow or pandas.
    assert!(!text.contains("skipped"), "tests were skipped:\n{text}");
}
