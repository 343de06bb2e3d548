// Tests of this crate run an embedded interpreter: find libpython where the build
// found it.
fn main() {
    pyo3_build_config::add_libpython_rpath_link_args();
}
