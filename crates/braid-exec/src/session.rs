//! The library session: what a user declares and runs, and the policy of running it.
//!
//! A [`Session`] owns a script's catalog (streams, tables, sinks, settings), its
//! compiled queries, the registry their plans name, and which queries have run. It
//! compiles statements as they come ([`Session::compile`]), groups queries into jobs
//! (a query over `LATE(sink)` runs in the dataflow of the query writing to `sink`),
//! places partitions by measured cost when asked ([`Session::set_calibration`]), runs
//! each job to the end of its input and returns what happened as data
//! ([`QueryReport`]). It prints nothing: a caller that wants a progress line reads the
//! live [`Counters`] it hands in through [`RunConfig::counters`].
//!
//! The `braid` command line and its shell are thin clients of it; so is a Rust program
//! that embeds Braid:
//!
//! ```
//! use braid_exec::runtime::RunConfig;
//! use braid_exec::session::Session;
//! use braid_plan::function::Registry;
//!
//! let dir = std::env::temp_dir().join(format!("braid-session-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! std::fs::write(dir.join("calls.csv"), "caller,dur,start\n1,5,0\n2,7,10\n1,3,120\n")?;
//! let mut session = Session::new(&Registry::with_builtins(), RunConfig { workers: 2, ..RunConfig::default() });
//! session.compile(
//!     "CREATE STREAM calls (caller BIGINT, dur BIGINT, start BIGINT)
//!        WITH (path = 'calls.csv', header = true, event_time = 'start', epoch = 60);
//!      CREATE SINK totals WITH (sink = 'collect');
//!      INSERT INTO totals SELECT caller, sum(dur) AS total FROM calls GROUP BY TUMBLE(start, 100), caller;",
//!     &dir,
//! )?;
//! let reports = session.run_pending()?;
//! assert_eq!(reports.len(), 1);
//! assert_eq!(reports[0].run.rows_in, 3);
//! assert_eq!(reports[0].run.collected.len(), 3); // (1, 12) and (2, 7) in [0, 100), (1, 3) in [100, 200)
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::calibrate::{calibrate, Calibration};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::profile::{annotate, Profiler};
use crate::runtime::{prepare, run, RunConfig, RunReport};
use crate::tune::WindowTuning;
use braid_plan::explain;
use braid_plan::function::Registry;
use braid_plan::optimize::{resolve, Env};
use braid_plan::plan::{Plan, SourceSpec};
use braid_sql::catalog::Listing;
use braid_sql::{add_statements, Job, Script, Show};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

pub use crate::source::Counters;

/// A session: declarations, compiled queries, and the runs of those queries.
pub struct Session {
    script: Script,
    config: RunConfig,
    calibrate: Option<u64>,
    /// Queries `0..ran` have been handed to [`Session::run_pending`] (run, or failed).
    ran: usize,
    /// Cancels the query running now (see [`Session::cancel_handle`]).
    cancel: Cancel,
    /// What became of each query handed to a run, by number.
    states: Vec<QueryState>,
    /// SHOW and DESCRIBE statements already handed out by [`Session::next_shown`].
    shown: usize,
}

/// What became of a query (`SHOW QUERIES`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueryState {
    /// Compiled, not run yet.
    Pending,
    /// Running now.
    Running,
    /// Ran to the end of its input (or of its `LIMIT`), writing `rows` rows.
    Done {
        /// Rows its sinks wrote.
        rows: u64,
    },
    /// Cancelled after writing `rows` rows.
    Cancelled {
        /// Rows its sinks wrote.
        rows: u64,
    },
    /// Failed with this error.
    Failed(String),
    /// Ran in the dataflow of another query (a query over `LATE(sink)`).
    RanWith(usize),
}

/// What running one job did: the query that owns the dataflow, and every query that
/// ran in it (queries over its late rows).
#[derive(Debug)]
pub struct QueryReport {
    /// The query's number in the session (0-based).
    pub query: usize,
    /// The query's text.
    pub sql: String,
    /// How its input was partitioned, and why.
    pub partitioning: String,
    /// The run.
    pub run: RunReport,
    /// The placement by measured cost, when calibration was asked for.
    pub calibration: Option<Calibration>,
    /// The physical window chosen by doubling, with `SET window = 'auto'`.
    pub window: Option<WindowTuning>,
    /// Late rows of each query that ran in this job and refused any.
    pub late: Vec<LateReport>,
}

/// Late rows of one query of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LateReport {
    /// The query's number in the session (0-based).
    pub query: usize,
    /// Whether other queries ran in the same dataflow (then reports name the query).
    pub shared_job: bool,
    /// Rows refused as late.
    pub rows: u64,
    /// Another query of the job read them as `LATE(...)`.
    pub read_as_stream: bool,
    /// The file they were written to (`late_path`).
    pub path: Option<PathBuf>,
}

impl Session {
    /// A session with nothing declared, running with `config`; `registry` holds the
    /// user code (stream functions, routes, combiners, sinks) statements may name.
    pub fn new(registry: &Registry, config: RunConfig) -> Session {
        Session {
            script: Script {
                catalog: Default::default(),
                jobs: Vec::new(),
                registry: registry.clone(),
                shown: Vec::new(),
            },
            config,
            calibrate: None,
            ran: 0,
            cancel: Cancel::new(),
            states: Vec::new(),
            shown: 0,
        }
    }

    /// Places each job's partitions by measured cost: before the run, the job runs on
    /// its first `rows` input rows with its output discarded (see [`crate::calibrate`]).
    /// `None` places them by number.
    pub fn set_calibration(&mut self, rows: Option<u64>) {
        self.calibrate = rows;
    }

    /// The run configuration.
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// Takes live rescale requests in the next runs (see [`RunConfig::rescale`]).
    pub fn set_rescale(&mut self, rescaler: Option<crate::rescale::Rescaler>) {
        self.config.rescale = rescaler;
    }

    /// Sets the live counters of the next runs (see [`RunConfig::counters`]).
    pub fn set_counters(&mut self, counters: Option<std::sync::Arc<Counters>>) {
        self.config.counters = counters;
    }

    /// Profiles the next run into `profile` (see [`RunConfig::profile`]; a fresh one
    /// for each run).
    pub fn set_profile(&mut self, profile: Option<std::sync::Arc<Profiler>>) {
        self.config.profile = profile;
    }

    /// EXPLAIN ANALYZE of a profiled run: its physical plan as EXPLAIN prints it, each
    /// node annotated with what it measured; `None` if the run was not profiled.
    pub fn analyze(&self, run: &RunReport) -> Option<String> {
        let (plan, profile) = (run.plan.as_ref()?, run.profile.as_ref()?);
        Some(annotate(
            plan,
            &self.script.registry,
            self.workers(),
            profile,
        ))
    }

    /// The registry of user code the session's plans name (its compiled queries too).
    pub fn registry(&self) -> &Registry {
        &self.script.registry
    }

    /// The registry, to add user code (functions, sources, sinks, languages) that
    /// statements compiled later may name.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.script.registry
    }

    /// The declarations, compiled queries and registry.
    pub fn script(&self) -> &Script {
        &self.script
    }

    /// Compiles `text` (one or more statements; relative paths are relative to `base`)
    /// into the session; returns the numbers of the queries it added. Nothing runs. A
    /// query over the late rows of a query that has already run is refused (its late
    /// rows were not kept), and then nothing of `text` is added.
    pub fn compile(&mut self, text: &str, base: &Path) -> Result<Vec<usize>> {
        let before = self.script.jobs.len();
        let saved = self.save();
        add_statements(&mut self.script, text, base)?;
        let too_late = self.script.jobs[before..]
            .iter()
            .find_map(|j| j.runs_in.filter(|&(owner, _)| owner < self.ran));
        if let Some((owner, _)) = too_late {
            self.restore(before, saved);
            return Err(braid_plan::error::Error::Plan(format!(
                "query {} has already run, so its late rows cannot be read any more; enter a \
                 query over its LATE(...) together with it",
                owner + 1
            ))
            .into());
        }
        Ok((before..self.script.jobs.len()).collect())
    }

    /// Compiles the script in the file at `path` (relative paths in it are relative to
    /// its directory); returns the numbers of the queries it added.
    pub fn compile_file(&mut self, path: &Path) -> Result<Vec<usize>> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        self.compile(&text, base_of(path)).map_err(|e| match e {
            Error::Plan(e) => Error::Script {
                path: path.to_path_buf(),
                error: e,
            },
            other => other,
        })
    }

    /// Runs every query not run yet, in order, each to the end of its input (queries
    /// over another's late rows run inside that query's job), and reports each job.
    /// Stops at the first failing job; the queries before it have run.
    pub fn run_pending(&mut self) -> Result<Vec<QueryReport>> {
        let mut reports = Vec::new();
        while let Some(r) = self.run_next() {
            reports.push(r?);
        }
        Ok(reports)
    }

    /// The query [`Session::run_next`] runs next, if one is left.
    pub fn next_job(&self) -> Option<&braid_sql::Job> {
        self.script.jobs[self.ran.min(self.script.jobs.len())..]
            .iter()
            .find(|j| j.runs_in.is_none())
    }

    /// Runs the next query not run yet (see [`Session::run_pending`]); `None` when every
    /// query has run.
    pub fn run_next(&mut self) -> Option<Result<QueryReport>> {
        while self.ran < self.script.jobs.len() {
            let index = self.ran;
            self.ran += 1;
            if let Some((owner, _)) = self.script.jobs[index].runs_in {
                // A query over LATE(sink) runs in the dataflow of the query writing to sink.
                self.set_state(index, QueryState::RanWith(owner));
                continue;
            }
            self.set_state(index, QueryState::Running);
            self.cancel.reset();
            let r = self.run_job(index);
            let state = match &r {
                Ok(r) if r.run.cancelled => QueryState::Cancelled {
                    rows: r.run.rows_out,
                },
                Ok(r) => QueryState::Done {
                    rows: r.run.rows_out,
                },
                Err(e) => QueryState::Failed(e.to_string()),
            };
            self.set_state(index, state);
            return Some(r);
        }
        None
    }

    /// A handle that cancels the query this session is running, from any thread: its
    /// sources stop, the rows already read drain, and [`Session::run_next`] returns its
    /// report with `run.cancelled` set (see [`crate::cancel`]). The handle stays valid
    /// for every later query; a cancel that comes when no query runs is forgotten when
    /// the next one starts.
    pub fn cancel_handle(&self) -> Cancel {
        self.cancel.clone()
    }

    /// What became of each query, by number (`SHOW QUERIES`).
    pub fn query_states(&self) -> Vec<(usize, &str, QueryState)> {
        let jobs = &self.script.jobs;
        (0..jobs.len())
            .map(|i| {
                let s = self.states.get(i).cloned().unwrap_or(QueryState::Pending);
                (i, jobs[i].sql.as_str(), s)
            })
            .collect()
    }

    /// The next SHOW or DESCRIBE listing due: one whose statement came after queries
    /// that have all been handed to a run. A caller prints them between runs (`braid
    /// run` and the shell do), so a script's listings come where its statements are.
    pub fn next_shown(&mut self) -> Option<Vec<Listing>> {
        let shown = self.script.shown.get(self.shown)?;
        if shown.after_jobs > self.ran {
            return None;
        }
        self.shown += 1;
        Some(match &shown.what {
            Show::Listings(l) => l.clone(),
            Show::Queries => vec![self.queries_listing()],
        })
    }

    /// `SHOW QUERIES`: each query's number, state, rows written and text.
    fn queries_listing(&self) -> Listing {
        let mut rows = Vec::new();
        for (i, sql, state) in self.query_states() {
            let (state, n) = match state {
                QueryState::Pending => ("pending".to_string(), String::new()),
                QueryState::Running => ("running".into(), String::new()),
                QueryState::Done { rows } => ("done".into(), rows.to_string()),
                QueryState::Cancelled { rows } => ("cancelled".into(), rows.to_string()),
                QueryState::Failed(e) => (format!("failed: {e}"), String::new()),
                QueryState::RanWith(o) => (format!("ran with query {}", o + 1), String::new()),
            };
            rows.push(vec![(i + 1).to_string(), state, n, sql.to_string()]);
        }
        Listing {
            header: ["query", "state", "rows", "sql"].map(String::from).to_vec(),
            rows,
        }
    }

    fn set_state(&mut self, index: usize, state: QueryState) {
        if self.states.len() <= index {
            self.states.resize(index + 1, QueryState::Pending);
        }
        self.states[index] = state;
    }

    /// Runs a plan built without SQL (the Rust API or the command line's flags), placed
    /// by measured cost when calibration is set.
    pub fn run_plan(&self, plan: &Plan) -> Result<(RunReport, Option<Calibration>)> {
        let (plan, calibration) = self.placed(plan, &self.config)?;
        let report = run(&plan, &self.script.registry, &self.config)?;
        Ok((report, calibration))
    }

    /// The physical plan of `plan` as EXPLAIN shows it (text, or Graphviz DOT), placed by
    /// measured cost when calibration is set.
    pub fn explain_plan(&self, plan: &Plan, dot: bool) -> Result<(String, Option<Calibration>)> {
        // EXPLAIN's measuring ignores a stale cancel.
        let config = RunConfig {
            cancel: None,
            ..self.config.clone()
        };
        let (plan, calibration) = self.placed(plan, &config)?;
        let workers = self.workers();
        let plan = prepare(&plan, &self.script.registry, workers)?;
        let text = match dot {
            true => explain::dot(&plan, &self.script.registry, workers),
            false => explain::text(&plan, &self.script.registry, workers),
        };
        Ok((text, calibration))
    }

    /// EXPLAIN of the queries `queries` (numbers in the session): per query its logical,
    /// optimized and physical plans (or Graphviz DOT). With calibration set, each query
    /// first runs on its first rows to be placed; those runs' late rows are forgotten.
    pub fn explain(&self, queries: &[usize], dot: bool) -> Result<String> {
        let mut out = String::new();
        for &i in queries {
            let job = self.job(i)?;
            if let Some((owner, plan)) = job.runs_in {
                let at = format!(
                    "runs in the dataflow of query {}, as plan {plan} of its Together",
                    owner + 1
                );
                match dot {
                    true => out.push_str(&format!("// query {}: {at}\n", i + 1)),
                    false => {
                        out.push_str(&format!("-- query {}: {}\n", i + 1, job.sql));
                        out.push_str(&braid_sql::explain_stages(job));
                        out.push_str(&format!("== physical plan ==\n{at}\n"));
                    }
                }
                continue;
            }
            let (plan, _, window) = self.placed_job(i, false)?;
            if let (Some(t), false) = (&window, dot) {
                out.push_str(&format!("-- {}\n", window_text(t)));
            }
            let placed = Job {
                plan,
                ..job.clone()
            };
            let workers = self.workers();
            if dot {
                let mut plan = placed.plan.clone();
                resolve(&mut plan, Env::workers(workers));
                for (k, (l, _)) in placed.stages.iter().enumerate() {
                    out.push_str(&l.dot(&format!("query{}_stage{}", i + 1, k + 1)));
                }
                out.push_str(&explain::dot(&plan, &self.script.registry, workers));
            } else {
                out.push_str(&format!("-- query {}: {}\n", i + 1, job.sql));
                out.push_str(&braid_sql::explain(&placed, &self.script.registry, workers));
            }
        }
        Ok(out)
    }

    /// EXPLAIN of the queries in `text` without keeping them: compiles `text`, explains
    /// the queries it adds, then forgets them (declarations in `text` stay).
    pub fn explain_statements(&mut self, text: &str, base: &Path, dot: bool) -> Result<String> {
        let before = self.script.jobs.len();
        let saved = self.save();
        add_statements(&mut self.script, text, base)?;
        let queries: Vec<usize> = (before..self.script.jobs.len()).collect();
        let out = self.explain(&queries, dot);
        self.restore(before, saved);
        out
    }

    fn workers(&self) -> usize {
        self.config.workers.max(1) * self.config.processes.max(1)
    }

    fn job(&self, i: usize) -> Result<&Job> {
        self.script
            .jobs
            .get(i)
            .ok_or_else(|| Error::Internal(format!("no query {}", i + 1)))
    }

    /// What [`Session::compile`] may have to undo: the late-row wiring and every plan
    /// (a query over `LATE(x)` joins the plan of the query writing to `x`).
    fn save(&self) -> Saved {
        Saved {
            shown: self.script.shown.len(),
            late: self.script.catalog.late.clone(),
            plans: self.script.jobs.iter().map(|j| j.plan.clone()).collect(),
        }
    }

    fn restore(&mut self, before: usize, saved: Saved) {
        self.script.jobs.truncate(before);
        self.script.shown.truncate(saved.shown);
        self.script.catalog.late = saved.late;
        for (job, plan) in self.script.jobs.iter_mut().zip(saved.plans) {
            job.plan = plan;
        }
    }

    /// `plan` with one splitter's rate measured where a split has a desired rate and no
    /// splitter rate (SQL's `SET desired_rate`, see [`crate::tune`]), placed by measured
    /// cost when calibration is set, as `config` runs it: its cancel (the run's, when
    /// the plan is placed to run) stops the measuring and the calibration run.
    fn placed(&self, plan: &Plan, config: &RunConfig) -> Result<(Plan, Option<Calibration>)> {
        let mut plan = plan.clone();
        crate::tune::measure_splitter_rates(
            &mut plan,
            &self.script.registry,
            config.processes,
            config.cancel.as_ref(),
        )?;
        match self.calibrate {
            None => Ok((plan, None)),
            Some(rows) => {
                let c = calibrate(&plan, &self.script.registry, config, rows)?;
                Ok((c.plan.clone(), Some(c)))
            }
        }
    }

    /// Query `index`'s plan placed (see [`Session::placed`]), its window chosen by
    /// doubling first with `SET window = 'auto'`; the late rows of the trial and
    /// calibration runs, of every query of the job, are forgotten.
    fn placed_job(
        &self,
        index: usize,
        running: bool,
    ) -> Result<(Plan, Option<Calibration>, Option<WindowTuning>)> {
        let job = self.job(index)?;
        let mut plan = job.plan.clone();
        // Running, a cancel (Ctrl-C) while the query is measured or tried stops that,
        // and then the run; EXPLAIN ignores a stale one.
        let config = RunConfig {
            cancel: running.then(|| self.cancel.clone()),
            ..self.config.clone()
        };
        let window = match job.tune_window {
            false => None,
            true => {
                let why = match (self.config.processes > 1, self.config.checkpoint.is_some()) {
                    (true, _) => Some("on several processes (each would choose its own W)"),
                    (_, true) => Some("with checkpoints (a resumed run could choose another W than the checkpoint's)"),
                    _ => None,
                };
                if let Some(why) = why {
                    return Err(Error::Plan(braid_plan::error::Error::NotSupported(format!(
                        "SET window = 'auto' {why}; give the streams their window (WITH (window = ...))"
                    ))));
                }
                // Paper V's order: p first (one splitter's rate at the declared W), then
                // W for the plan as it will run (`placed` finds p measured then).
                crate::tune::measure_splitter_rates(
                    &mut plan,
                    &self.script.registry,
                    config.processes,
                    config.cancel.as_ref(),
                )?;
                let t = crate::tune::window_by_doubling(&plan, &self.script.registry, &config)?;
                crate::tune::set_window(&mut plan, t.chosen);
                Some(t)
            }
        };
        let placed = self.placed(&plan, &config)?;
        if placed.1.is_some() || window.is_some() {
            for (_, j) in self.members(index) {
                j.late
                    .reset()
                    .map_err(|e| Error::io("emptying the late-row file after calibration", e))?;
            }
        }
        Ok((placed.0, placed.1, window))
    }

    /// The queries that run in the dataflow of query `index`: itself, then the queries
    /// over its late rows (and theirs), by number.
    fn members(&self, index: usize) -> Vec<(usize, &Job)> {
        let jobs = &self.script.jobs;
        let mut all = vec![(index, &jobs[index])];
        all.extend(
            jobs.iter()
                .enumerate()
                .filter(|(_, j)| j.runs_in.map(|(o, _)| o) == Some(index)),
        );
        all
    }

    fn run_job(&self, index: usize) -> Result<QueryReport> {
        let (plan, calibration, window) = self.placed_job(index, true)?;
        let mut config = RunConfig {
            cancel: Some(self.cancel.clone()),
            ..self.config.clone()
        };
        // Each query of a script checkpoints into its own directory; resuming, a query
        // that had finished is not run again (its output is whole).
        let done = config.checkpoint.as_mut().map(|c| {
            c.dir = c.dir.join(format!("query-{index}"));
            c.backend = c
                .backend
                .as_ref()
                .map(|b| b.child(&format!("query-{index}")));
            c.store()
        });
        if let (Some(done), Some(recover)) = (&done, config.checkpoint.as_ref().map(|c| c.recover))
        {
            if !recover {
                // Starting over: an earlier run's mark must not make a resume of this run
                // skip the query.
                done.delete("DONE")?;
            } else if done.get("DONE")?.is_some() {
                let job = &self.script.jobs[index];
                return Ok(QueryReport {
                    query: index,
                    sql: job.sql.clone(),
                    partitioning: job.partitioning.clone(),
                    run: RunReport {
                        finished_before: true,
                        ..RunReport::default()
                    },
                    calibration,
                    window,
                    late: Vec::new(),
                });
            }
        }
        let members = self.members(index);
        if config.checkpoint.is_some() {
            if let Some(path) = members.iter().find_map(|(_, j)| j.late.path()) {
                return Err(Error::Plan(braid_plan::error::Error::NotSupported(format!(
                    "`SET late_path` ({}) in a run with checkpoints: the file of late rows is not cut back to a checkpoint, so a resumed run would lose or repeat rows in it (late rows are counted in any case; read them as a stream with LATE(sink) instead)",
                    path.display()
                ))));
            }
        }
        if let Some(c) = &config.counters {
            let mut late = c.late_rows.lock().unwrap_or_else(|e| e.into_inner());
            *late = members.iter().map(|(_, j)| j.late.clone()).collect();
        }
        let report = run(&plan, &self.script.registry, &config)?;
        if let (Some(done), false) = (&done, report.cancelled) {
            done.put("DONE", b"")?;
        }
        let mut late = Vec::new();
        for &(i, j) in &members {
            j.late.flush();
            let rows = j.late.count.load(Ordering::Relaxed);
            if rows == 0 {
                continue;
            }
            // Its plan in the dataflow, and whether another member reads that plan's rows.
            let plan = j.runs_in.map_or(0, |(_, p)| p);
            let read_as_stream = members.iter().any(
                |(_, r)| matches!(r.plan.leaf_source().spec, SourceSpec::Late { of } if of == plan),
            );
            late.push(LateReport {
                query: i,
                shared_job: members.len() > 1,
                rows,
                read_as_stream,
                path: j.late.path().map(Path::to_path_buf),
            });
        }
        let job = &self.script.jobs[index];
        Ok(QueryReport {
            query: index,
            sql: job.sql.clone(),
            partitioning: job.partitioning.clone(),
            run: report,
            calibration,
            window,
            late,
        })
    }
}

/// What `SET window = 'auto'` measured, in a line: `W by doubling (Paper V): 64: 3.1 M
/// rows/s, 128: ...; chosen W = 512`.
pub fn window_text(t: &WindowTuning) -> String {
    let steps: Vec<String> = t
        .measured
        .iter()
        .map(|(w, r)| match r.is_finite() {
            true => format!("{w}: {:.2} M rows/s", r / 1e6),
            false => format!("{w}: stopped (cancelled)"),
        })
        .collect();
    format!(
        "W by doubling (Paper V, trial runs of up to {} ms, median of 3): {}; chosen W = {}",
        crate::tune::WINDOW_TRIAL.as_millis(),
        steps.join(", "),
        t.chosen
    )
}

/// See [`Session::save`].
struct Saved {
    shown: usize,
    late: std::collections::BTreeMap<String, braid_sql::catalog::LateStream>,
    plans: Vec<Plan>,
}

/// The directory relative paths of a script file are relative to.
fn base_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}
