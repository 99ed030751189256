//! Postgres `LISTEN` relayed into a broadcast channel: one listener connection per process
//! and channel, reconnecting when the database goes away. A notification is a wake-up, never
//! the data (notifications sent while reconnecting are lost: readers re-read on `Lagged`).

use std::time::Duration;

use sqlx::{PgPool, postgres::PgListener};
use tokio::sync::broadcast;

/// Forward the payloads of `channel` to `tx` until the pool is closed.
pub async fn relay(pool: PgPool, channel: &'static str, tx: broadcast::Sender<String>) {
    loop {
        match PgListener::connect_with(&pool).await {
            Ok(mut l) => {
                if let Err(e) = l.listen(channel).await {
                    tracing::warn!("LISTEN {channel} failed: {e}");
                } else {
                    while let Ok(n) = l.recv().await {
                        let _ = tx.send(n.payload().to_string());
                    }
                }
            }
            Err(e) => tracing::debug!("{channel} relay: {e}"),
        }
        if pool.is_closed() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
