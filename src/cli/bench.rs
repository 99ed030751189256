//! `mnote bench ingest | index | embed | search | rag` (see docs/BENCHMARKS.md).

use super::BenchCommand;
use crate::startup;

pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Rag { tenant, lightrag_url, lightrag_key_file, docs, queries, rounds } => {
            crate::rag::bench::run(crate::rag::bench::BenchArgs {
                tenant: &tenant,
                url: &lightrag_url,
                key_file: lightrag_key_file.as_deref(),
                docs: &docs,
                queries,
                rounds,
                app: startup::build_router,
            })
            .await
        }
        BenchCommand::Ingest { docs, rounds } => crate::ingest::bench::ingest_command(&docs, rounds),
        BenchCommand::Index { tenant, rounds } => crate::ingest::bench::index_command(&tenant, rounds).await,
        BenchCommand::Embed { tenant, limit } => crate::search::bench::embed_command(&tenant, limit).await,
        BenchCommand::Search { tenant, kb, corpus, queries, blocks, clients, requests, mode, sql_baseline } => {
            crate::search::bench::search_command(crate::search::bench::BenchArgs {
                tenant: &tenant,
                kb: &kb,
                corpus: &corpus,
                queries: &queries,
                blocks,
                clients,
                requests,
                modes: &mode,
                sql_baseline,
                app: startup::build_router,
            })
            .await
        }
    }
}
