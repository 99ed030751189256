//! Named binds: each value pushed gets the next `$n` placeholder, so SQL built with `format!`
//! never counts parameters by hand.

use sqlx::{Arguments, Encode, Postgres, Type, error::BoxDynError, postgres::PgArguments, query::Query};

/// The arguments of one statement, in push order.
#[derive(Default)]
pub(super) struct Binds {
    args: PgArguments,
    /// The first encoding failure, returned by [`Binds::query`].
    error: Option<BoxDynError>,
}

impl Binds {
    pub(super) fn new() -> Self {
        Self::default()
    }

    /// Add `value` and return its placeholder (`$1`, `$2`, …) to put into the SQL text.
    pub(super) fn push<'q, T: 'q + Encode<'q, Postgres> + Type<Postgres>>(&mut self, value: T) -> String {
        let n = self.args.len() + 1;
        if let Err(e) = self.args.add(value)
            && self.error.is_none()
        {
            self.error = Some(format!("Encoding argument ${n} failed: {e}").into());
        }
        format!("${n}")
    }

    /// The statement `sql` with these arguments, or the first value that failed to encode.
    pub(super) fn query(self, sql: &str) -> sqlx::Result<Query<'_, Postgres, PgArguments>> {
        match self.error {
            Some(e) => Err(sqlx::Error::Encode(e)),
            // dynamic SQL: the search's statements are assembled from optional filters, one `$n` per pushed value
            None => Ok(sqlx::query_with(sql, self.args)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_follow_push_order() {
        let mut b = Binds::new();
        let ids = vec![uuid::Uuid::nil()];
        assert_eq!(b.push(&ids), "$1");
        assert_eq!(b.push(Some("a/")), "$2");
        assert_eq!(b.push(true), "$3");
        assert_eq!(b.push(10_i64), "$4");
        assert_eq!(b.args.len(), 4);
        assert!(b.error.is_none());
    }
}
