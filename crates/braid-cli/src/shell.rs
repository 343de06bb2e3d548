//! `braid shell`: statements typed one after another into one session. A query runs as
//! soon as its statement is complete and its rows stream to the screen; Ctrl-C cancels
//! it (the rows shown stay) and the shell goes on. `EXPLAIN <query>;` shows plans
//! without running; SHOW and DESCRIBE list what is declared; `help` or `\?` lists what
//! the shell takes; `\q`, `quit`, `exit` or Ctrl-D quit. History is kept in
//! `~/.braid_history`.

use crate::args::{check, QueryArgs, Use};
use crate::progress::Progress;
use crate::{listing, lrb, report};
use anyhow::Result;
use braid_exec::profile::Profiler;
use braid_exec::session::Session;
use clap::ArgMatches;
use rustyline::error::ReadlineError;
use std::path::Path;

/// What `help` and `\?` print.
const HELP: &str = "\
Statements (end each with `;`):
  CREATE [OR REPLACE] STREAM name (columns) WITH (source = ..., ...)
  CREATE [OR REPLACE] TABLE name (columns) WITH (path = ...)
  CREATE [OR REPLACE] SINK name WITH (sink = ..., ...)
  CREATE [OR REPLACE] VIEW name AS SELECT ...
  DROP STREAM|TABLE|SINK|VIEW [IF EXISTS] name
  SET option = value
  SELECT ... [LIMIT n]                  runs now, rows to the screen
  INSERT INTO sink SELECT ... [LIMIT n] runs now, rows to the sink
  EXPLAIN SELECT ...                    plans, without running
  SHOW STREAMS | SINKS | TABLES | VIEWS | QUERIES
  DESCRIBE name                         columns and options
Commands:
  help, \\?                              this list
  \\q, quit, exit, Ctrl-D                quit
  Ctrl-C                                cancel the running query, or clear the line
";

/// Runs the shell until `\q` or the end of input.
pub fn shell(q: &QueryArgs, matches: &ArgMatches) -> Result<()> {
    check(matches, Use::Shell)?;
    let mut registry = crate::registry();
    let lr_sink = lrb::register_for_script(&mut registry, q)?;
    let mut session = Session::new(&registry, q.run_config()?);
    session.set_calibration(q.calibrate);
    // Ctrl-C while a query runs cancels it. At the prompt the line editor reads Ctrl-C
    // as a key (and clears the line); a signal that comes there (input not a terminal)
    // is forgotten when the next query starts.
    let cancel = session.cancel_handle();
    ctrlc::set_handler(move || cancel.cancel())?;
    let mut ed = rustyline::DefaultEditor::new()?;
    let history = std::env::var_os("HOME").map(|h| Path::new(&h).join(".braid_history"));
    if let Some(h) = &history {
        let _ = ed.load_history(h);
    }
    let mut pending = String::new();
    eprintln!("Braid shell: end statements with `;`; `help` lists what it takes, `\\q` quits.");
    loop {
        let prompt = match pending.is_empty() {
            true => "braid> ",
            false => "   ... ",
        };
        let line = match ed.readline(prompt) {
            Ok(l) => l,
            Err(ReadlineError::Interrupted) => {
                pending.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        };
        if pending.is_empty() {
            match line.trim().trim_end_matches(';').trim() {
                "\\q" | "quit" | "exit" => break,
                "help" | "\\?" => {
                    out!("{HELP}")?;
                    continue;
                }
                _ => {}
            }
        }
        pending.push_str(&line);
        pending.push('\n');
        if !line.trim_end().ends_with(';') {
            continue;
        }
        let text = std::mem::take(&mut pending);
        let _ = ed.add_history_entry(text.trim());
        statement(&mut session, &text, q.progress)?;
    }
    if let Some(h) = &history {
        let _ = ed.save_history(h);
    }
    if let Some(sink) = lr_sink {
        braid_plan::function::SinkFn::flush(sink.as_ref())?;
    }
    Ok(())
}

/// Handles one complete statement: an error is reported and the shell goes on; only a
/// closed standard output ends it. What compiled before an error still runs.
fn statement(session: &mut Session, text: &str, progress: bool) -> Result<()> {
    let trimmed = text.trim_start();
    if let Some(query) = after_words(trimmed, &["explain", "analyze"]) {
        return analyze(session, query);
    }
    let explain = trimmed.len() > 8 && trimmed[..8].eq_ignore_ascii_case("explain ");
    if explain {
        match session.explain_statements(&trimmed[8..], Path::new("."), false) {
            Ok(plans) => out!("{plans}")?,
            Err(e) => eprintln!("{e}"),
        }
        return Ok(());
    }
    if let Err(e) = session.compile(text, Path::new(".")) {
        eprintln!("{e}");
    }
    loop {
        listing::print_due(session)?;
        let (counters, bar) = Progress::only_if(progress, None);
        session.set_counters(counters);
        let Some(next) = session.run_next() else {
            return listing::print_due(session);
        };
        drop(bar);
        match next {
            Ok(r) => {
                report::query(&r);
                if r.run.cancelled {
                    eprintln!("braid: query cancelled after {} rows", r.run.rows_out);
                }
            }
            Err(e) => {
                let e = anyhow::Error::from(e);
                if crate::closed_pipe(&e) {
                    return Err(e);
                }
                eprintln!("braid: {e:#}");
            }
        }
    }
}

/// The text after `words` (any case, separated by white space) at the start of `text`.
fn after_words<'t>(mut text: &'t str, words: &[&str]) -> Option<&'t str> {
    for w in words {
        let head = text.get(..w.len())?;
        let rest = &text[w.len()..];
        if !head.eq_ignore_ascii_case(w) || !rest.starts_with(char::is_whitespace) {
            return None;
        }
        text = rest.trim_start();
    }
    Some(text)
}

/// `EXPLAIN ANALYZE <query>;`: runs the query (its rows stream as usual), then prints
/// its physical plan with what each node measured.
fn analyze(session: &mut Session, query: &str) -> Result<()> {
    if let Err(e) = session.compile(query, Path::new(".")) {
        eprintln!("{e}");
        return Ok(());
    }
    loop {
        session.set_profile(Some(Profiler::new()));
        let Some(next) = session.run_next() else {
            break;
        };
        match next {
            Ok(r) => {
                report::query(&r);
                out!("{}", session.analyze(&r.run).unwrap_or_default())?;
            }
            Err(e) => eprintln!("braid: {:#}", anyhow::Error::from(e)),
        }
    }
    session.set_profile(None);
    Ok(())
}
