//! Errors of the execution layer.

/// Every error a run can end with, by who is to blame.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The plan is wrong or not supported (from `braid-plan`).
    #[error(transparent)]
    Plan(#[from] braid_plan::error::Error),
    /// A script file is wrong (the plan error, located in the file's text).
    #[error("{}: {error}", path.display())]
    Script {
        /// The script file.
        path: std::path::PathBuf,
        /// What is wrong, with line and column.
        error: braid_plan::error::Error,
    },
    /// Input could not be read as declared; only in strict mode, otherwise such records
    /// are counted and reported.
    #[error("{source_name}: line {line}, column {column}: {message}")]
    Input {
        /// The source's name.
        source_name: String,
        /// 1-based line.
        line: u64,
        /// 1-based column.
        column: u64,
        /// What was found and what was expected.
        message: String,
    },
    /// A value could not be computed (overflow, division by zero, a failed cast); only
    /// in strict mode (`--on-error fail`), otherwise the row is skipped and reported.
    #[error("{site}: {row} (--on-error skip would skip the row)")]
    Fault {
        /// Where: the query stage (`query1`, `query1_2`) or split.
        site: String,
        /// The operator, the row and what went wrong.
        row: crate::fault::FaultRow,
    },
    /// An operating-system error (file, socket).
    #[error("{context}: {error}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        error: std::io::Error,
    },
    /// A system outside Braid (a Kafka broker) refused or failed.
    #[error("{0}")]
    Connector(String),
    /// timely could not start (e.g. a cluster peer did not connect).
    #[error("could not start workers: {0}")]
    Startup(String),
    /// User code panicked: a stream function, routing function or combiner.
    #[error("{what} panicked: {message}")]
    UserCode {
        /// What it was, with its registered name (and a stream function's partition).
        what: String,
        /// The panic message.
        message: String,
    },
    /// A checkpoint that cannot be restored into this plan (taken from another plan, or
    /// with another number of stages): the caller may start the query over instead.
    #[error("{0}")]
    UnusableCheckpoint(String),
    /// A bug in Braid.
    #[error("internal error (a bug in Braid, please report it): {0}")]
    Internal(String),
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An I/O error with context.
    pub fn io(context: impl Into<String>, error: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            error,
        }
    }
}

/// What a `braid` built without a cargo feature answers when a query needs it (`what`:
/// the sources and sinks it would bring, `feature`: its name): refused by name.
#[cfg(not(all(feature = "kafka", feature = "parquet")))]
pub(crate) fn not_built(what: &str, feature: &str) -> Error {
    Error::Plan(braid_plan::error::Error::NotSupported(format!(
        "{what}: this braid was built without them (build it with the `{feature}` feature, on by default)"
    )))
}
