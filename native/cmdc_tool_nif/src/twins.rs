//! The normal/dirty NIF pairs, written once. Bounded work runs on a normal scheduler under a
//! budget and answers `{:error, :yield}` when over it; `Native.with_dirty/1` then calls the
//! `_dirty` twin, the same function on a dirty CPU scheduler. [`twin_nifs!`] defines both from one
//! body that reads `dirty` (a constant in each, so the compiler drops the other branch).

/// `twin_nifs! { /// docs
/// fn name / name_dirty<'a>(env: Env, arg: Type, ...) -> (Ret), |dirty| { body } }`: two NIFs
/// with the same arguments, `name` on a normal scheduler (`dirty == false`) and `name_dirty`
/// with `schedule = "DirtyCpu"` (`dirty == true`). `env: Env` (first, written without its
/// lifetime) is optional.
///
/// Why this spelling: every part is passed on as plain tokens, since `rustler::nif` does not
/// read types a macro captured as `ty` fragments (hence the return type in parentheses); and
/// the `Env` parameter is declared by the macro, in the hygiene of the wrapper `rustler::nif`
/// generates, and handed to the body under the caller's name.
macro_rules! twin_nifs {
    // With the caller's `Env` (named by the caller, first): the NIFs take it as `env` written
    // here, in this macro's hygiene, which is the name `rustler::nif`'s wrapper passes.
    ($(#[$meta:meta])*
     fn $name:ident / $dirty_name:ident <$lt:lifetime> ($env:ident: Env, $($params:tt)*)
         -> ($($ret:tt)+),
     |$dirty:ident| { $($body:tt)* }) => {
        $(#[$meta])*
        #[rustler::nif]
        fn $name<$lt>(env: rustler::Env<$lt>, $($params)*) -> $($ret)+ {
            let ($env, $dirty) = (env, false);
            $($body)*
        }

        /// The dirty-scheduler twin of the NIF above (see `twins.rs`).
        #[rustler::nif(schedule = "DirtyCpu")]
        fn $dirty_name<$lt>(env: rustler::Env<$lt>, $($params)*) -> $($ret)+ {
            let ($env, $dirty) = (env, true);
            $($body)*
        }
    };
    ($(#[$meta:meta])*
     fn $name:ident / $dirty_name:ident $(<$lt:lifetime>)? ($($params:tt)*) -> ($($ret:tt)+),
     |$dirty:ident| { $($body:tt)* }) => {
        $(#[$meta])*
        #[rustler::nif]
        fn $name $(<$lt>)? ($($params)*) -> $($ret)+ {
            let $dirty = false;
            $($body)*
        }

        /// The dirty-scheduler twin of the NIF above (see `twins.rs`).
        #[rustler::nif(schedule = "DirtyCpu")]
        fn $dirty_name $(<$lt>)? ($($params)*) -> $($ret)+ {
            let $dirty = true;
            $($body)*
        }
    };
}

pub(crate) use twin_nifs;
