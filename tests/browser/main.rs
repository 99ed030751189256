//! End-to-end tests in a real headless browser: Debian's Chromium driven through its
//! ChromeDriver (WebDriver, with `fantoccini`) against the real server of `spawn_app`.
//!
//! Each test indexes documents, signs in through the login form, searches on `/search`,
//! clicks the result and checks on the viewer page that the highlight (`#hl`) exists, is
//! visible in the viewport after the `#hl` scroll and covers the cited text: for PDFs and
//! images the overlay rectangle against where the generator drew the word (and against the
//! rendered `img.page-img`), for DOCX and Markdown the highlighted element's text.
//! A screenshot of every case goes to `target/browser-artifacts/`.
//!
//! Run with `./dev test --test browser` (it installs chromium + chromium-driver).
//! `MNOTE_CHROMIUM` / `MNOTE_CHROMEDRIVER` override /usr/bin/chromium and /usr/bin/chromedriver.

#[path = "../common/files.rs"]
mod files;
#[allow(dead_code)]
#[path = "../api/helpers.rs"]
mod helpers;

#[allow(dead_code)]
#[path = "../api/lightrag.rs"]
mod lightrag;

mod account;
mod ai;
mod ask;
mod browser;
mod connect;
mod conversations;
mod downloads;
mod kb;
mod screens;
mod search;
mod settings;
mod viewer;
mod walk;
