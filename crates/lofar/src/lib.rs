//! Numeric vector streams on Braid (thesis Papers I, II and VI: LOFAR, the radio
//! telescope whose receivers stream sample vectors): a LOFAR-like source
//! ([`signal`]) and a radix-2 parallel FFT as a plan of stream functions ([`radix2`]).
//! Transient detection is plain SQL over the arrays (`examples/transients.sql`).
#![warn(missing_docs)]

pub mod radix2;
pub mod signal;
