//! Property names of the hot path (run events), made once per Node environment as
//! internalized strings and kept in one array. `napi_set_named_property` makes and
//! internalizes the name from UTF-8 on every call: that string-table lookup was the
//! largest single cost of building an event on Node's thread.
use std::cell::Cell;
use std::ptr;

use napi::bindgen_prelude::*;
use napi::sys;

macro_rules! keys {
    ($($key:ident = $name:literal,)*) => {
        /// A cached name; its value is its index in the table.
        #[derive(Clone, Copy, Debug)]
        #[repr(u32)]
        #[allow(clippy::enum_variant_names)] // the names of the JS keys they cache
        pub(crate) enum Key { $($key,)* }
        const NAMES: &[&str] = &[$($name,)*];
    };
}

keys! {
    // run events
    Type = "type",
    CallId = "callId",
    Name = "name",
    Payload = "payload",
    Id = "id",
    Key = "key",
    Level = "level",
    Message = "message",
    Referrer = "referrer",
    Typescript = "typescript",
    // event types (values, cached like the names)
    Started = "started",
    Console = "console",
    HostCall = "hostCall",
    DataRequest = "dataRequest",
    ModuleRequest = "moduleRequest",
    Done = "done",
}

thread_local! {
    /// The table of this thread's environment (one environment per thread in Node).
    static TABLE: Cell<(sys::napi_env, sys::napi_ref)> = const { Cell::new((ptr::null_mut(), ptr::null_mut())) };
}

pub(crate) fn check_status(status: sys::napi_status) -> Result<()> {
    check(status)
}

fn check(status: sys::napi_status) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::new(Status::from(status), "isolet: a napi call on a hot path failed".to_string()))
    }
}

/// The names, valid in the caller's handle scope.
#[derive(Clone, Copy)]
pub(crate) struct Keys {
    env: sys::napi_env,
    array: sys::napi_value,
}

impl Keys {
    /// The table of `env` (made on first use).
    ///
    /// # Safety
    /// On `env`'s thread, inside a handle scope.
    pub(crate) unsafe fn of(env: sys::napi_env) -> Result<Keys> {
        let (owner, reference) = TABLE.with(Cell::get);
        let mut array = ptr::null_mut();
        // SAFETY: as the caller promises; `reference` belongs to `env` when `owner` is it.
        unsafe {
            if owner == env && !reference.is_null() {
                check(sys::napi_get_reference_value(env, reference, &mut array))?;
                if !array.is_null() {
                    return Ok(Keys { env, array });
                }
            }
            // Names set as properties are internalized; the object's own names, read back in
            // insertion order (none is an array index), are those internalized strings.
            let mut object = ptr::null_mut();
            check(sys::napi_create_object(env, &mut object))?;
            let mut null = ptr::null_mut();
            check(sys::napi_get_null(env, &mut null))?;
            for name in NAMES {
                let c_name = std::ffi::CString::new(*name).expect("key names have no NUL");
                check(sys::napi_set_named_property(env, object, c_name.as_ptr(), null))?;
            }
            check(sys::napi_get_all_property_names(
                env,
                object,
                sys::KeyCollectionMode::own_only,
                sys::KeyFilter::skip_symbols,
                sys::KeyConversion::keep_numbers,
                &mut array,
            ))?;
            let mut length = 0;
            check(sys::napi_get_array_length(env, array, &mut length))?;
            if length as usize != NAMES.len() {
                return Err(Error::from_reason("isolet: property name table has the wrong length"));
            }
            let mut reference = ptr::null_mut();
            check(sys::napi_create_reference(env, array, 1, &mut reference))?;
            let (_, old) = TABLE.with(|t| t.replace((env, reference)));
            if owner == env && !old.is_null() {
                sys::napi_delete_reference(env, old);
            }
        }
        Ok(Keys { env, array })
    }

    fn key(&self, key: Key) -> Result<sys::napi_value> {
        let mut value = ptr::null_mut();
        // SAFETY: `array` is live in the current handle scope (see `of`).
        check(unsafe { sys::napi_get_element(self.env, self.array, key as u32, &mut value) })?;
        Ok(value)
    }

    /// The cached string `key` itself, as a value (event types).
    pub(crate) fn string(&self, key: Key) -> Result<sys::napi_value> {
        self.key(key)
    }

    /// A new object with these properties (one `napi_define_properties` call).
    pub(crate) fn object(&self, properties: &[(Key, sys::napi_value)]) -> Result<sys::napi_value> {
        let mut descriptors = Vec::with_capacity(properties.len());
        for (key, value) in properties {
            descriptors.push(sys::napi_property_descriptor {
                utf8name: ptr::null(),
                name: self.key(*key)?,
                method: None,
                getter: None,
                setter: None,
                value: *value,
                attributes: sys::PropertyAttributes::writable | sys::PropertyAttributes::enumerable | sys::PropertyAttributes::configurable,
                data: ptr::null_mut(),
            });
        }
        let mut object = ptr::null_mut();
        // SAFETY: on the env's thread; the descriptors' values are live in this scope.
        unsafe {
            check(sys::napi_create_object(self.env, &mut object))?;
            check(sys::napi_define_properties(self.env, object, descriptors.len(), descriptors.as_ptr()))?;
        }
        Ok(object)
    }
}

/// Forgets this thread's table (its environment is being torn down).
pub(crate) fn forget(env: sys::napi_env) {
    let _ = TABLE.try_with(|t| {
        let (owner, reference) = t.get();
        if owner == env && !reference.is_null() {
            // SAFETY: on the env's thread, which is still alive (cleanup hook).
            unsafe { sys::napi_delete_reference(env, reference) };
            t.set((ptr::null_mut(), ptr::null_mut()));
        }
    });
}

impl Keys {
    pub(crate) fn env(&self) -> sys::napi_env {
        self.env
    }
}

/// Plain napi values made and read directly (no napi-rs conversion layer).
pub(crate) mod value {
    use super::check;
    use napi::bindgen_prelude::*;
    use napi::sys;
    use std::ptr;

    // SAFETY (every function here): called on the env's thread inside a handle scope, with
    // values of that scope; each is a single napi call with valid out-pointers.

    pub(crate) fn string(env: sys::napi_env, s: &str) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        check(unsafe { sys::napi_create_string_utf8(env, s.as_ptr().cast(), s.len() as isize, &mut v) })?;
        Ok(v)
    }

    pub(crate) fn f64(env: sys::napi_env, n: f64) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        check(unsafe { sys::napi_create_double(env, n, &mut v) })?;
        Ok(v)
    }

    pub(crate) fn u32(env: sys::napi_env, n: u32) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        check(unsafe { sys::napi_create_uint32(env, n, &mut v) })?;
        Ok(v)
    }

    pub(crate) fn bool(env: sys::napi_env, b: bool) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        check(unsafe { sys::napi_get_boolean(env, b, &mut v) })?;
        Ok(v)
    }

    /// `p` as the JS value V8's deserializer would make of it.
    pub(crate) fn primitive(env: sys::napi_env, p: isolet_core::primitive::Primitive<'_>) -> Result<sys::napi_value> {
        use isolet_core::primitive::Primitive;
        let mut v = ptr::null_mut();
        let status = unsafe {
            match p {
                Primitive::Int32(n) => sys::napi_create_int32(env, n, &mut v),
                Primitive::Double(n) => sys::napi_create_double(env, n, &mut v),
                Primitive::Bool(b) => sys::napi_get_boolean(env, b, &mut v),
                Primitive::Null => sys::napi_get_null(env, &mut v),
                Primitive::Undefined => sys::napi_get_undefined(env, &mut v),
                Primitive::OneByteString(s) => sys::napi_create_string_latin1(env, s.as_ptr().cast(), s.len() as isize, &mut v),
            }
        };
        check(status)?;
        Ok(v)
    }

    pub(crate) fn array(env: sys::napi_env, len: usize) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        check(unsafe { sys::napi_create_array_with_length(env, len, &mut v) })?;
        Ok(v)
    }

    pub(crate) fn set_element(env: sys::napi_env, array: sys::napi_value, i: u32, item: sys::napi_value) -> Result<()> {
        check(unsafe { sys::napi_set_element(env, array, i, item) })
    }

    /// Bytes at or below this size are copied into a JS-owned Buffer; above it, the Buffer
    /// wraps the Rust allocation (no copy, but a finalizer and a weak handle per Buffer,
    /// which cost more than copying a small payload).
    const COPY_BELOW: usize = 64 * 1024;

    pub(crate) fn buffer(env: sys::napi_env, bytes: Vec<u8>) -> Result<sys::napi_value> {
        if bytes.len() <= COPY_BELOW {
            let mut data = ptr::null_mut();
            let mut v = ptr::null_mut();
            check(unsafe { sys::napi_create_buffer_copy(env, bytes.len(), bytes.as_ptr().cast(), &mut data, &mut v) })?;
            return Ok(v);
        }
        unsafe { Buffer::to_napi_value(env, bytes.into()) }
    }

    pub(crate) fn type_of(env: sys::napi_env, v: sys::napi_value) -> Result<sys::napi_valuetype> {
        let mut t = 0;
        check(unsafe { sys::napi_typeof(env, v, &mut t) })?;
        Ok(t)
    }

    pub(crate) fn to_string(env: sys::napi_env, v: sys::napi_value) -> Result<Option<String>> {
        if type_of(env, v)? != sys::ValueType::napi_string {
            return Ok(None);
        }
        let mut len = 0;
        check(unsafe { sys::napi_get_value_string_utf8(env, v, ptr::null_mut(), 0, &mut len) })?;
        let mut buf = vec![0u8; len + 1];
        let mut written = 0;
        check(unsafe { sys::napi_get_value_string_utf8(env, v, buf.as_mut_ptr().cast(), buf.len(), &mut written) })?;
        buf.truncate(written);
        // V8 wrote UTF-8 (lone surrogates as U+FFFD).
        Ok(Some(String::from_utf8(buf).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())))
    }

    pub(crate) fn array_len(env: sys::napi_env, v: sys::napi_value) -> Result<Option<u32>> {
        let mut is_array = false;
        check(unsafe { sys::napi_is_array(env, v, &mut is_array) })?;
        if !is_array {
            return Ok(None);
        }
        let mut len = 0;
        check(unsafe { sys::napi_get_array_length(env, v, &mut len) })?;
        Ok(Some(len))
    }

    pub(crate) fn element(env: sys::napi_env, array: sys::napi_value, i: u32) -> Result<sys::napi_value> {
        let mut v = ptr::null_mut();
        check(unsafe { sys::napi_get_element(env, array, i, &mut v) })?;
        Ok(v)
    }

    /// The bytes of a Buffer (or any Uint8Array), copied.
    pub(crate) fn to_bytes(env: sys::napi_env, v: sys::napi_value) -> Result<Option<Vec<u8>>> {
        let mut is_buffer = false;
        check(unsafe { sys::napi_is_buffer(env, v, &mut is_buffer) })?;
        if !is_buffer {
            return Ok(None);
        }
        let mut data = ptr::null_mut();
        let mut len = 0;
        check(unsafe { sys::napi_get_buffer_info(env, v, &mut data, &mut len) })?;
        if len == 0 || data.is_null() {
            return Ok(Some(Vec::new()));
        }
        // SAFETY: napi reported `len` readable bytes at `data`, alive in this scope.
        Ok(Some(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }.to_vec()))
    }
}
