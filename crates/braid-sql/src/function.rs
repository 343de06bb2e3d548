//! `CREATE FUNCTION ... LANGUAGE name AS $$ body $$` and `DROP FUNCTION`: scalar
//! functions written in a language the embedder registered (the `braid` command
//! registers Python), added to the script's registry by name.

use crate::expr::sql_type;
use crate::logical::AggFunc;
use crate::script::Script;
use braid_plan::error::{Error, Result};
use braid_plan::expr::Func;
use braid_plan::function::FunctionDef;
use sqlparser::ast;

/// Declares the function `cf` into the script's registry.
pub(crate) fn create(script: &mut Script, cf: &ast::CreateFunction) -> Result<()> {
    let name = cf.name.to_string().to_ascii_lowercase();
    let refuse = |what: &str| {
        Err(Error::NotSupported(format!(
            "{what} in CREATE FUNCTION {name}; Braid takes CREATE [OR REPLACE] FUNCTION name(arg type, ...) RETURNS type LANGUAGE python AS $$ body $$"
        )))
    };
    if cf.or_alter {
        return refuse("OR ALTER");
    }
    if cf.temporary {
        return refuse("TEMPORARY");
    }
    if cf.using.is_some() || cf.remote_connection.is_some() || cf.options.is_some() {
        return refuse("USING, REMOTE or OPTIONS");
    }
    if cf.called_on_null.is_some() || cf.parallel.is_some() || cf.security.is_some() {
        return refuse("a NULL, PARALLEL or SECURITY clause");
    }
    if !cf.set_params.is_empty() || cf.determinism_specifier.is_some() {
        return refuse("SET or DETERMINISTIC");
    }
    if Func::by_name(&name).is_some() || AggFunc::by_name(&name).is_some() {
        return Err(Error::Plan(format!(
            "`{name}` is a built-in function; give the function another name"
        )));
    }
    let exists = script.registry.scalar(&name).is_some();
    if exists && cf.if_not_exists {
        return Ok(());
    }
    if exists && !cf.or_replace {
        return Err(Error::Plan(format!(
            "function `{name}` exists; write CREATE OR REPLACE FUNCTION to replace it, or DROP FUNCTION {name} first"
        )));
    }
    let mut args = Vec::new();
    for (i, a) in cf.args.iter().flatten().enumerate() {
        if a.mode
            .as_ref()
            .is_some_and(|m| !matches!(m, ast::ArgMode::In))
            || a.default_expr.is_some()
        {
            return refuse("an OUT or INOUT argument or a default");
        }
        let Some(arg) = &a.name else {
            return Err(Error::Plan(format!(
                "argument {} of function `{name}` has no name; write name type",
                i + 1
            )));
        };
        let ty = sql_type(&a.data_type).map_err(|e| {
            Error::NotSupported(format!("argument `{arg}` of function `{name}`: {e}"))
        })?;
        args.push((arg.value.clone(), ty));
    }
    if args.len() > braid_plan::expr::UDF_MAX_ARGS {
        return Err(Error::Plan(format!(
            "function `{name}` takes {} arguments; a function takes at most {}",
            args.len(),
            braid_plan::expr::UDF_MAX_ARGS
        )));
    }
    let returns = match &cf.return_type {
        Some(ast::FunctionReturnType::DataType(t)) => sql_type(t).map_err(|e| {
            Error::NotSupported(format!("the result type of function `{name}`: {e}"))
        })?,
        Some(ast::FunctionReturnType::SetOf(_)) => return refuse("RETURNS SETOF"),
        None => return Err(Error::Plan(format!("function `{name}` needs RETURNS type"))),
    };
    if returns.is_time() {
        return Err(Error::NotSupported(format!(
            "function `{name}` returning {returns}; a function returns BIGINT, DOUBLE, BOOLEAN or TEXT"
        )));
    }
    let Some(language) = &cf.language else {
        return Err(Error::Plan(format!(
            "function `{name}` needs LANGUAGE (python)"
        )));
    };
    let body = match &cf.function_body {
        Some(ast::CreateFunctionBody::AsBeforeOptions {
            body,
            link_symbol: None,
        })
        | Some(ast::CreateFunctionBody::AsAfterOptions(body)) => match body {
            ast::Expr::Value(v) => match &v.value {
                ast::Value::DollarQuotedString(s) => s.value.clone(),
                ast::Value::SingleQuotedString(s) => s.clone(),
                _ => return refuse("a body that is not a string"),
            },
            _ => return refuse("a body that is not a string"),
        },
        Some(_) => return refuse("this form of body"),
        None => {
            return Err(Error::Plan(format!(
                "function `{name}` needs a body: AS $$ ... $$"
            )))
        }
    };
    let def = FunctionDef {
        name: name.clone(),
        args,
        returns,
        language: language.value.to_ascii_lowercase(),
        body,
    };
    let f = script.registry.language(&def.language)?.scalar(&def)?;
    script.registry.add_scalar(&name, f);
    Ok(())
}

/// Removes the functions `df` names from the script's registry.
pub(crate) fn drop(script: &mut Script, df: &ast::DropFunction) -> Result<()> {
    if df.drop_behavior.is_some() {
        return Err(Error::NotSupported(
            "CASCADE or RESTRICT in DROP FUNCTION".into(),
        ));
    }
    for f in &df.func_desc {
        let name = f.name.to_string();
        if script.registry.remove_scalar(&name).is_none() && !df.if_exists {
            return Err(Error::Plan(format!("no function `{name}` to drop")));
        }
    }
    Ok(())
}
