//! Atoms shared by the NIF modules.

rustler::atoms! {
    ok,
    error,
    r#yield = "yield",
    nil,
    path,
    keyword,
    message,
    kind,
    log,
    schema_path,
    not_found,
    invalid_tool,
    conflict,
    reserved,
    none,
    tool,
    stale,
    direct,
    api,
}
