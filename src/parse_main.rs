//! `mnote-parse`: the children the server runs — the parser (`ingest::worker`), the page
//! renderer (`viewer::render`) and an ACP agent's sandbox shim (`platform::supervise::shim`) —
//! with the same arguments as `mnote parse-file`, `mnote render-page` and `mnote sandbox-shim`,
//! and the same output and exit codes (2 on arguments it does not take).
//! Only the providers and the renderer are linked in: no server, runtime, logging or CLI
//! framework to start, so a child per small file costs about half of what the `mnote` binary does.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: mnote-parse parse-file [--probe] --kind KIND PATH\n       \
                     mnote-parse render-page --kind KIND --page N --width W --height H SRC OUT\n       \
                     mnote-parse sandbox-shim …";

fn main() -> ExitCode {
    if let Some(code) = mnote::platform::supervise::shim::dispatch() {
        return code;
    }
    let code = match Child::parse(std::env::args_os().skip(1)) {
        Some(Child::Parse { kind, probe: true, path }) => mnote::ingest::worker::probe_file_main(&path, &kind),
        Some(Child::Parse { kind, probe: false, path }) => mnote::ingest::worker::parse_file_main(&path, &kind),
        Some(Child::Render { kind, page, width, height, src, out }) => {
            mnote::viewer::render::render_page_main(&kind, page, width, height, &src, &out)
        }
        None => {
            eprintln!("{USAGE}");
            2
        }
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

enum Child {
    Parse { kind: String, probe: bool, path: PathBuf },
    Render { kind: String, page: u32, width: u32, height: u32, src: PathBuf, out: PathBuf },
}

impl Child {
    /// The arguments as `ingest::worker` and `viewer::render` pass them; `None` for anything else.
    fn parse(mut it: impl Iterator<Item = OsString>) -> Option<Child> {
        let command = it.next()?;
        let (mut flags, mut paths) = (Flags::default(), Vec::new());
        while let Some(a) = it.next() {
            match a.to_str() {
                Some("--probe") => flags.probe = true,
                Some(flag @ ("--kind" | "--page" | "--width" | "--height")) => {
                    let value = it.next()?.into_string().ok()?;
                    flags.set(flag, value)?;
                }
                Some(s) if s.starts_with("--") => return None,
                _ => paths.push(PathBuf::from(a)),
            }
        }
        let kind = flags.kind?;
        match (command.to_str()?, paths.as_slice()) {
            ("parse-file", [path]) if flags.page.is_none() => Some(Child::Parse { kind, probe: flags.probe, path: path.clone() }),
            ("render-page", [src, out]) if !flags.probe => Some(Child::Render {
                kind,
                page: flags.page?,
                width: flags.width?,
                height: flags.height?,
                src: src.clone(),
                out: out.clone(),
            }),
            _ => None,
        }
    }
}

#[derive(Default)]
struct Flags {
    kind: Option<String>,
    probe: bool,
    page: Option<u32>,
    width: Option<u32>,
    height: Option<u32>,
}

impl Flags {
    fn set(&mut self, flag: &str, value: String) -> Option<()> {
        match flag {
            "--kind" => self.kind = Some(value),
            "--page" => self.page = Some(value.parse().ok()?),
            "--width" => self.width = Some(value.parse().ok()?),
            _ => self.height = Some(value.parse().ok()?),
        }
        Some(())
    }
}
