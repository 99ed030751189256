//! The real-world test documents (`tests/testdata/SOURCES.tsv`), provisioned from package
//! registries by `./dev test` into `$MNOTE_TESTDATA_DIR`. A missing document fails the test
//! with a message naming the variable: these tests never skip.

use std::path::PathBuf;

/// The path of one document, e.g. `testdata::path("pdf/pypdf_multilang.pdf")`.
pub fn path(rel: &str) -> PathBuf {
    let dir = std::env::var_os("MNOTE_TESTDATA_DIR").map(PathBuf::from).expect(
        "MNOTE_TESTDATA_DIR is not set: run the tests through `./dev test`, which provisions the \
         real-world test documents of tests/testdata/SOURCES.tsv",
    );
    let path = dir.join(rel);
    assert!(
        path.is_file(),
        "{} is missing: `./dev test` provisions MNOTE_TESTDATA_DIR from tests/testdata/SOURCES.tsv",
        path.display()
    );
    path
}

/// The bytes of one document.
pub fn read(rel: &str) -> Vec<u8> {
    let path = path(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
