use clap::Parser;
use mnote::platform::log_limit::Limited;
use tracing_subscriber::{EnvFilter, fmt, layer::SubscriberExt, util::SubscriberInitExt};

fn main() -> std::process::ExitCode {
    // The sandbox shim of an ACP agent: one thread, no runtime, no logging.
    if let Some(code) = mnote::platform::supervise::shim::dispatch() {
        return code;
    }
    run_cli()
}

#[tokio::main]
async fn run_cli() -> std::process::ExitCode {
    mnote::platform::http::install_tls_provider();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=info,rmcp=warn"));
    let json = mnote::config::log_format_json();
    // Other crates' warnings pass a limit (one line per call site per minute, then the count
    // held back): notify alone writes hundreds a second while a watched directory churns.
    let registry = tracing_subscriber::registry().with(filter);
    if json {
        registry.with(Limited::new(fmt::layer().json().with_writer(std::io::stderr))).init();
    } else {
        registry.with(Limited::new(fmt::layer().with_writer(std::io::stderr))).init();
    }
    let cli = mnote::cli::Cli::parse();
    match mnote::cli::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
