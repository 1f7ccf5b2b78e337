//! Per-attempt specs (`attempt_specs`, one row per attempt, replaced on save) and phase logs
//! (`phase_logs`, append-only, one row per append).

use orchestrator_core::repository::{tail_lines, AttemptSpecs, LogKey, LogQuery};
use orchestrator_core::state::Phase;
use orchestrator_core::{NodeId, PlanId, StoreError};
use tokio_postgres::IsolationLevel;

use super::error::{self, corrupt};
use super::plans::{is_missing_plan, Inner};

/// Rows fetched at a time while looking for the start of a log's tail.
const TAIL_ROWS: i32 = 64;

/// How a phase is stored: its serialized (kebab-case) name.
fn phase_name(phase: Phase) -> String {
    match serde_json::to_value(phase) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{phase:?}"),
    }
}

/// Newlines in `chunk` that end a line before the last byte of the whole text (`last` says
/// whether `chunk` is the text's final chunk): a final newline ends the last line rather than
/// starting another, as in [`tail_lines`].
fn line_breaks(chunk: &[u8], last: bool) -> usize {
    let body = if last {
        &chunk[..chunk.len().saturating_sub(1)]
    } else {
        chunk
    };
    body.iter().filter(|&&b| b == b'\n').count()
}

fn text(bytes: Vec<u8>) -> String {
    // Logs are appended as text; damage still reads, with replacement characters.
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

impl Inner {
    pub(super) async fn save_attempt_specs(
        &self,
        plan: &PlanId,
        node: &NodeId,
        attempt: u32,
        specs: &AttemptSpecs,
    ) -> Result<(), StoreError> {
        let path = self.plan_path(plan);
        let json = serde_json::to_string(specs).map_err(|e| StoreError::Rejected {
            plan: plan.clone(),
            message: format!("cannot serialize the attempt specs: {e}"),
        })?;
        let client = self.db.client("save the attempt specs").await?;
        client
            .execute(
                "INSERT INTO attempt_specs (plan_id, node_id, attempt, specs)
                 VALUES ($1, $2, $3, $4::text::json)
                 ON CONFLICT (plan_id, node_id, attempt) DO UPDATE SET specs = EXCLUDED.specs",
                &[&plan.as_str(), &node.as_str(), &i64::from(attempt), &json],
            )
            .await
            .map_err(|e| match is_missing_plan(&e) {
                true => StoreError::NotFound(plan.clone()),
                false => error::db("save the attempt specs", &path, e),
            })?;
        Ok(())
    }

    pub(super) async fn load_attempt_specs(
        &self,
        plan: &PlanId,
        node: &NodeId,
        attempt: u32,
    ) -> Result<AttemptSpecs, StoreError> {
        let path = self.plan_path(plan);
        let fail = |e| error::db("load the attempt specs", &path, e);
        let client = self.db.client("load the attempt specs").await?;
        let row = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM plans WHERE plan_id = $1),
                        (SELECT specs::text FROM attempt_specs
                         WHERE plan_id = $1 AND node_id = $2 AND attempt = $3)",
                &[&plan.as_str(), &node.as_str(), &i64::from(attempt)],
            )
            .await
            .map_err(fail)?;
        if !row.try_get::<_, bool>(0).map_err(fail)? {
            return Err(StoreError::NotFound(plan.clone()));
        }
        let Some(json) = row.try_get::<_, Option<String>>(1).map_err(fail)? else {
            return Ok(AttemptSpecs::default());
        };
        serde_json::from_str(&json).map_err(|e| {
            let at = path
                .join("specs")
                .join(node.as_str())
                .join(attempt.to_string());
            corrupt(&at, format!("not attempt specs: {e}"))
        })
    }

    pub(super) async fn append_log(&self, key: &LogKey, text: &str) -> Result<(), StoreError> {
        let plan = &key.plan;
        let path = self.plan_path(plan);
        let client = self.db.client("append to the log").await?;
        if text.is_empty() {
            let found = client
                .query_opt("SELECT 1 FROM plans WHERE plan_id = $1", &[&plan.as_str()])
                .await
                .map_err(|e| error::db("append to the log", &path, e))?;
            return found
                .map(|_| ())
                .ok_or_else(|| StoreError::NotFound(plan.clone()));
        }
        client
            .execute(
                "INSERT INTO phase_logs (plan_id, node_id, attempt, phase, chunk)
                 VALUES ($1, $2, $3, $4, $5)",
                &[
                    &plan.as_str(),
                    &key.node.as_str(),
                    &i64::from(key.attempt),
                    &phase_name(key.phase),
                    &text.as_bytes(),
                ],
            )
            .await
            .map_err(|e| match is_missing_plan(&e) {
                true => StoreError::NotFound(plan.clone()),
                false => error::db("append to the log", &path, e),
            })?;
        Ok(())
    }

    /// A node's logs for `query`: the chosen attempt's phases in pipeline order, each phase's
    /// appends in order. With a tail, rows are read from the end only until enough lines are
    /// found.
    pub(super) async fn read_log(
        &self,
        plan: &PlanId,
        node: &NodeId,
        query: LogQuery,
    ) -> Result<String, StoreError> {
        let path = self.plan_path(plan);
        let fail = |e| error::db("read the log", &path, e);
        let mut client = self.db.client("read the log").await?;
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(fail)?;
        let head = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM plans WHERE plan_id = $1),
                        (SELECT max(attempt) FROM phase_logs WHERE plan_id = $1 AND node_id = $2)",
                &[&plan.as_str(), &node.as_str()],
            )
            .await
            .map_err(fail)?;
        if !head.try_get::<_, bool>(0).map_err(fail)? {
            return Err(StoreError::NotFound(plan.clone()));
        }
        let attempt = match query.attempt {
            Some(a) => i64::from(a),
            None => match head.try_get::<_, Option<i64>>(1).map_err(fail)? {
                Some(a) => a,
                None => return Ok(String::new()),
            },
        };
        if query.tail == Some(0) {
            return Ok(String::new());
        }
        let phases: Vec<String> = match query.phase {
            Some(p) => vec![phase_name(p)],
            None => Phase::ALL.into_iter().map(phase_name).collect(),
        };
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&plan.as_str(), &node.as_str(), &attempt, &phases];
        let select = "SELECT chunk FROM phase_logs
             WHERE plan_id = $1 AND node_id = $2 AND attempt = $3 AND phase = ANY($4)";
        let Some(n) = query.tail else {
            let sql = format!("{select} ORDER BY array_position($4, phase), id");
            let rows = tx.query(sql.as_str(), &params).await.map_err(fail)?;
            let mut out = Vec::new();
            for row in rows {
                out.extend_from_slice(row.try_get::<_, &[u8]>(0).map_err(fail)?);
            }
            tx.commit().await.map_err(fail)?;
            return Ok(text(out));
        };
        // From the end, a few rows at a time, until the chunks hold `n` line breaks.
        let sql = format!("{select} ORDER BY array_position($4, phase) DESC, id DESC");
        let statement = tx.prepare(sql.as_str()).await.map_err(fail)?;
        let portal = tx.bind(&statement, &params).await.map_err(fail)?;
        let mut chunks: Vec<Vec<u8>> = Vec::new();
        let mut breaks = 0;
        'rows: loop {
            let rows = tx.query_portal(&portal, TAIL_ROWS).await.map_err(fail)?;
            if rows.is_empty() {
                break;
            }
            for row in rows {
                let chunk: Vec<u8> = row.try_get(0).map_err(fail)?;
                breaks += line_breaks(&chunk, chunks.is_empty());
                chunks.push(chunk);
                if breaks >= n {
                    break 'rows;
                }
            }
        }
        // Closes the portal (it may hold rows not read) and the snapshot.
        tx.commit().await.map_err(fail)?;
        let mut out = Vec::with_capacity(chunks.iter().map(Vec::len).sum());
        for chunk in chunks.iter().rev() {
            out.extend_from_slice(chunk);
        }
        Ok(tail_lines(&text(out), n).to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_stored_by_their_serialized_names() {
        assert_eq!(phase_name(Phase::MergeFi), "merge-fi");
        assert_eq!(phase_name(Phase::Work), "work");
    }

    #[test]
    fn a_final_newline_is_not_a_line_break() {
        assert_eq!(line_breaks(b"a\nb\n", true), 1);
        assert_eq!(line_breaks(b"a\nb\n", false), 2);
        assert_eq!(line_breaks(b"", true), 0);
    }
}
