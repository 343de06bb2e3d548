//! One query, parallelized automatically: planned ([`crate::planner`]), optimized (filters
//! pushed down, cut into stages: [`crate::optimizer`]), each stage partitioned by what its
//! state needs, and built into `Source -> (Split -> Map -> Merge) per stage -> Sink`
//! ([`crate::physical`]), each stage's query running on its partitions ([`crate::run`]).

use crate::catalog::{Settings, SinkDef, StreamDef};
use crate::located::At;
use crate::logical::Logical;
use crate::optimizer;
use crate::physical::{self, Partitioning};
use crate::planner::Planner;
use crate::run::{LateLayout, LateRows, Layout, QueryFactory};
use crate::script::{Job, Script};
use braid_plan::error::{Error, Result};
use braid_plan::function::Registry;
use braid_plan::plan::{Pace, Plan, Source, SourceSpec};
use sqlparser::ast::{self, Spanned};
use std::sync::Arc;

/// The job of query `q` (its text `sql`) writing to `sink`.
pub(crate) fn job(
    script: &mut Script,
    text: &str,
    q: &ast::Query,
    sink: &SinkDef,
    sql: &str,
) -> Result<Job> {
    // Plan the query, and find its input.
    let (logical, inputs) = plan(script, text, q)?;
    let defs: Vec<&StreamDef> = inputs
        .iter()
        .map(|s| script.catalog.stream(s))
        .collect::<Result<_>>()?;
    if defs.len() > 1
        && defs
            .iter()
            .any(|d| matches!(d.source.spec, SourceSpec::Late { .. }))
    {
        return Err(Error::NotSupported(
            "a query over LATE(sink) that also reads another stream; read the late rows alone"
                .into(),
        )
        .at(text, q.span()));
    }
    let (source, layout, lateness) = physical::input_source(&defs).at(text, q.span())?;
    let single_input = defs.len() == 1;
    let settings = script.catalog.settings.clone();
    // Optimize: filters down, then two phases for an aggregate, then the cut into
    // stages. Two phases need the stage cut by subquery, and are for a parallel run only
    // (a serial one has nothing to gain from them); the cut itself does not depend on
    // `parallel`: a serial run has the same stages, each in one partition.
    let mut pushed = optimizer::push_filters_down(logical.clone());
    if settings.two_phase && settings.auto && settings.stages == crate::catalog::Cut::Subquery {
        pushed = optimizer::two_phase(pushed);
    }
    let mut stages = optimizer::cut(pushed, settings.stages, &layout, &source.schema);
    // Where the rows its operators refuse as late go.
    let late = Arc::new(
        LateRows::new(settings.late_path.as_deref())
            .map_err(|e| Error::Plan(format!("cannot create the late-row file: {e}")))?,
    );
    let late_layout = LateLayout::of(&stages.iter().collect::<Vec<_>>());
    // One Split -> Map -> Merge per stage, then the sink.
    let build = Build {
        source: &source,
        layout: &layout,
        lateness,
        single_input,
        late: &late,
        late_layout: late_layout.as_ref(),
        settings: &settings,
        query: script.jobs.len() + 1,
    };
    let (plan, described) = build.stages(&mut script.registry, &mut stages)?;
    let plan = physical::sink(plan, sink);
    plan.schema(&script.registry)?;
    Ok(Job {
        sql: sql.to_string(),
        logical: Some(logical),
        partitioning: partitioning_text(&described),
        stages: described,
        plan,
        late_source: late_layout.map(|l| late_source(l, &source)),
        late,
        runs_in: None,
        time_unit: planner_unit(&defs),
        tune_window: false,
    })
}

/// The time unit the query's streams share, if they declare one.
fn planner_unit(defs: &[&StreamDef]) -> Option<crate::time::TimeUnit> {
    let first = defs.first()?.time_unit;
    defs.iter().all(|d| d.time_unit == first).then_some(first)?
}

/// The logical plan of `q` and the streams it reads, in order of first use.
fn plan(script: &Script, text: &str, q: &ast::Query) -> Result<(Logical, Vec<String>)> {
    let mut planner = Planner::new(&script.catalog, &script.registry, text);
    let (logical, _) = planner.query(q)?;
    Ok((logical, planner.inputs))
}

/// What building every stage of one query shares.
struct Build<'a> {
    /// The query's input.
    source: &'a Source,
    /// Where each input stream's columns sit in the source's rows.
    layout: &'a Layout,
    /// Allowed lateness of the input, the same in every stage: lateness is a property of
    /// the input, judged as in one stage (see `run`).
    lateness: i64,
    /// The query reads one stream (a filter on it can move into the balancer).
    single_input: bool,
    late: &'a Arc<LateRows>,
    late_layout: Option<&'a LateLayout>,
    settings: &'a Settings,
    /// The query's number in the script, from 1 (its functions are `query{n}[_{k}]`).
    query: usize,
}

impl Build<'_> {
    /// The plan up to the last stage's merge, and each stage with its partitioning.
    fn stages(
        &self,
        registry: &mut Registry,
        stages: &mut [Logical],
    ) -> Result<(Plan, Vec<(Logical, String)>)> {
        let n_stages = stages.len();
        let mut plan = Plan::Source(self.source.clone());
        let mut described = Vec::new();
        // How far below the watermark the times of the rows the stages so far hand on
        // may lie (`Logical::time_hold`): a later stage allows that much more lateness,
        // so it judges and closes as the query in one stage does.
        let mut held = 0i64;
        for (k, stage) in stages.iter_mut().enumerate() {
            // The first stage reads the source; later ones the previous stage's output.
            let (layout, phys) = if k == 0 {
                (self.layout.clone(), self.source.schema.clone())
            } else {
                (physical::stage_layout(stage), plan.schema(registry)?)
            };
            let (part, when) = self.partition(k, stage, &layout, &phys);
            let function = if n_stages == 1 {
                format!("query{}", self.query)
            } else {
                format!("query{}_{}", self.query, k + 1)
            };
            let mut factory = QueryFactory::new(
                stage.clone(),
                layout,
                self.source.epoch,
                self.lateness.saturating_add(held),
                self.late.clone(),
            );
            held = held.saturating_add(stage.time_hold());
            if k > 0 {
                factory = factory.after_cut();
            }
            // Hash partitioning keys every stateful operator's state by what rows are
            // hashed by; any partition is chosen only without state, and one partition
            // stays one. A grid copies rows over partitions by no key.
            if !matches!(part, Partitioning::Grid { .. }) {
                factory = factory.rescalable();
            }
            if let Some(l) = self.late_layout {
                factory = factory.with_late_stream(l, k);
            }
            registry.add_function(&function, Arc::new(factory));
            let last = k + 1 == n_stages;
            plan = physical::stage(plan, &part, when, &function, self.settings, last);
            described.push((stage.clone(), part.to_string()));
        }
        Ok((plan, described))
    }

    /// How stage `k` is partitioned, and the filter that moves into its balancer (for
    /// the first stage of a query over one stream, hashed or in one partition).
    fn partition(
        &self,
        k: usize,
        stage: &mut Logical,
        layout: &Layout,
        phys: &braid_plan::types::Schema,
    ) -> (Partitioning, Option<braid_plan::expr::Expr>) {
        let auto = self.settings.auto;
        let mut part = if auto {
            optimizer::partitioning(stage, layout, phys)
        } else {
            Partitioning::Single("SET parallel = 'off'".into())
        };
        let mut when = None;
        if k == 0
            && matches!(part, Partitioning::Hash { .. } | Partitioning::Single(_))
            && self.single_input
        {
            when = optimizer::pull_scan_filter(stage, layout, phys);
            if when.is_some() && auto {
                part = optimizer::partitioning(stage, layout, phys);
            }
        }
        (part, when)
    }
}

/// EXPLAIN's partitioning line: the one stage's, or each stage's.
fn partitioning_text(described: &[(Logical, String)]) -> String {
    if described.len() == 1 {
        described[0].1.clone()
    } else {
        described
            .iter()
            .enumerate()
            .map(|(k, (_, p))| format!("stage {}: {p}", k + 1))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The stream of the query's late rows: plan 0 of its dataflow's `Together`.
fn late_source(layout: LateLayout, source: &Source) -> Source {
    Source {
        name: "late".into(),
        spec: SourceSpec::Late { of: 0 },
        schema: layout.schema,
        epoch: source.epoch,
        window: source.window,
        pace: Pace::Max,
        out_of_order: true,
        shed: None,
    }
}
