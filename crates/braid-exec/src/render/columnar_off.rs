//! Parquet and Arrow files in a `braid` built without the `parquet` feature: refused
//! by name when a query would write one (no arrow or parquet compiled in).

use crate::error::Result;
use braid_plan::batch::Batch;
use braid_plan::connector::FileFormat;
use braid_plan::types::Schema;
use std::convert::Infallible;
use std::path::Path;

/// Never made: [`ColumnarWriter::create`] refuses.
pub(crate) struct ColumnarWriter(Infallible);

impl ColumnarWriter {
    pub fn create(_: &Path, _: FileFormat, _: &Schema) -> Result<ColumnarWriter> {
        Err(crate::error::not_built(
            "Parquet and Arrow files",
            "parquet",
        ))
    }

    pub fn write(&mut self, _: &Batch) -> Result<()> {
        match self.0 {}
    }

    pub fn finish(&mut self) -> Result<()> {
        match self.0 {}
    }
}

/// Refused: rows as an Arrow IPC stream need the `parquet` feature.
pub fn ipc_stream(_: &Schema, _: &[&Batch]) -> Result<Vec<u8>> {
    Err(crate::error::not_built(
        "Parquet and Arrow files",
        "parquet",
    ))
}
