//! Atoms shared by the NIF modules.

rustler::atoms! {
    ok,
    error,
    r#yield = "yield",
    nil,
    path,
    keyword,
    message,
    schema_path,
}
