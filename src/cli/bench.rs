//! `mnote bench ingest | index | embed | search | rag | runs | mcp | answers` (see docs/BENCHMARKS.md).

use super::BenchCommand;
use crate::startup;

/// Questions about the demo documents (`./dev up`), in English and Chinese.
const DEMO_QUESTIONS: &[&str] = &[
    "What does a scoped thread guarantee about borrowed data?",
    "When are scoped threads joined?",
    "How do I spawn threads that borrow from the stack?",
    "线程作用域是什么？",
    "作用域线程什么时候结束？",
];

pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Runs { tenant, clients, events, deltas, questions } => {
            let questions = if questions.is_empty() { DEMO_QUESTIONS.iter().map(|q| q.to_string()).collect() } else { questions };
            crate::journal::bench::run(crate::journal::bench::BenchArgs {
                tenant: &tenant,
                clients,
                events,
                deltas,
                questions,
                app: startup::build_router,
            })
            .await
        }
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
        BenchCommand::Mcp { tenant, clients, rounds, questions } => {
            let questions = if questions.is_empty() { DEMO_QUESTIONS.iter().map(|q| q.to_string()).collect() } else { questions };
            crate::mcp::bench::run(crate::mcp::bench::BenchArgs {
                tenant: &tenant,
                clients,
                rounds,
                questions,
                app: startup::build_router,
            })
            .await
        }
        BenchCommand::Answers { tenant, kb, corpus, cmrc, held_out, limit, dump } => {
            crate::agents::builtin::bench::answers_command(crate::agents::builtin::bench::BenchArgs {
                tenant: &tenant,
                kb: &kb,
                corpus: corpus.as_deref(),
                held_out,
                cmrc: &cmrc,
                limit,
                dump: dump.as_deref(),
                load: crate::ingest::corpus::load_boxed,
            })
            .await
        }
        BenchCommand::Ingest { docs, rounds, only } => crate::ingest::bench::ingest_command(&docs, rounds, &only),
        BenchCommand::Index { tenant, rounds } => crate::ingest::bench::index_command(&tenant, rounds).await,
        BenchCommand::Embed { tenant, limit } => crate::search::bench::embed_command(&tenant, limit).await,
        BenchCommand::Search { tenant, kb, corpus, queries, clients, requests, mode, read_replica: true, .. } => {
            crate::search::bench_replica::run(crate::search::bench_replica::ReplicaArgs {
                tenant: &tenant,
                kb: &kb,
                corpus: &corpus,
                queries: &queries,
                clients,
                requests,
                modes: &mode,
                app: startup::build_router,
                load: crate::ingest::corpus::load_boxed,
            })
            .await
        }
        BenchCommand::Search {
            tenant,
            kb,
            corpus,
            queries,
            blocks,
            clients,
            requests,
            mode,
            sql_baseline,
            rates,
            open_loop_secs,
            qrels,
            tantivy,
            read_replica: false,
        } => {
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
                rates,
                open_loop_secs,
                qrels: qrels.as_deref(),
                tantivy,
                app: startup::build_router,
                load: crate::ingest::corpus::load_boxed,
            })
            .await
        }
    }
}
