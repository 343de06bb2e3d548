//! The server driven by psycopg 3 (`pip install "psycopg[binary]"`; `.ci/run` installs
//! it): the extended query protocol with server-side parameters, a subscriber on
//! another connection, COPY, SQLSTATE errors. The client session is
//! tests/psycopg_session.py; it checks its rows against values it computes itself.

#[test]
fn a_psycopg_session_runs_on_the_extended_protocol() {
    for workers in [1, 2] {
        let config = braid_server::ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            workers,
            data: None,
            ..Default::default()
        };
        let server = braid_server::start(&config, &braid_plan::function::Registry::with_builtins())
            .expect("the server starts");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/psycopg_session.py");
        let out = std::process::Command::new("python3")
            .arg(script)
            .arg(server.addr.port().to_string())
            .output()
            .expect("python3 runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.trim() == "ok",
            "{workers} workers: {stdout}{stderr}"
        );
        server.stop();
    }
}
