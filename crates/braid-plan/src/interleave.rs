//! Several sources merged into one stream (filled in by the interleave work).
