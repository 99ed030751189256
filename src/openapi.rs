//! The API's OpenAPI 3.1 document, built from the handlers' own types.
//!
//! Each feature describes its `/api` routes beside its router (`api_doc(&mut ApiDoc)`), with
//! the request and response types its handlers take and return: their JSON Schemas come from
//! `schemars::JsonSchema` derives on those types (JSON Schema 2020-12, OpenAPI 3.1's dialect),
//! so the document follows the code. Errors are one `ErrorBody` schema; each operation lists
//! the statuses it can answer with their stable codes. `startup::openapi` assembles the whole
//! document, served at `GET /api/openapi.json` and checked into `docs/openapi.json`.
//!
//! Why a small builder and not utoipa or aide: both bring their own proc-macro crates (the
//! first build is already long, issue 30) and want every handler annotated (utoipa's
//! `#[utoipa::path]`) or every router and extractor rewritten (aide's `ApiRouter`, `OperationIo`
//! for our `Auth`, `ApiJson`, `Page` extractors). `schemars` is already a dependency (the agent
//! tools' schemas), derives exactly what serde writes and reads (renames, `flatten`, skipped
//! fields), and 2020-12 is OpenAPI 3.1's dialect as it is; what remains — paths, statuses,
//! error codes, security — is this file.

use std::collections::BTreeMap;

use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};

use crate::error::ErrorBody;

/// The name of the session cookie (`web::SESSION_COOKIE`; `openapi` imports no feature).
const SESSION_COOKIE: &str = "mnote_session";

/// The document being built. Responses are described as the server writes them (serialize
/// contract), request bodies and query strings as it reads them (deserialize contract).
pub struct ApiDoc {
    out: SchemaGenerator,
    input: SchemaGenerator,
    paths: BTreeMap<String, Map<String, Value>>,
    /// The error answers (`components/responses`), one per status and set of codes.
    errors: Map<String, Value>,
    /// Properties described by a feature above the one that owns the type (a run's `receipt`,
    /// stored as JSON by the journal, typed by the agents): (schema, property, its schema).
    properties: Vec<(String, String, Value)>,
}

impl Default for ApiDoc {
    fn default() -> Self {
        Self::new()
    }
}

fn settings() -> SchemaSettings {
    SchemaSettings::draft2020_12().with(|s| {
        s.definitions_path = "/components/schemas".into();
        s.meta_schema = None;
    })
}

impl ApiDoc {
    pub fn new() -> Self {
        ApiDoc {
            out: settings().for_serialize().into_generator(),
            input: settings().for_deserialize().into_generator(),
            paths: BTreeMap::new(),
            errors: Map::new(),
            properties: Vec::new(),
        }
    }

    /// Describe `property` of the response schema `schema` as a `T` (a field its owner keeps
    /// as free JSON because the type belongs to a feature it may not import).
    pub fn property<T: JsonSchema>(&mut self, schema: &str, property: &str) {
        let s = self.out.subschema_for::<T>().to_value();
        self.properties.push((schema.to_string(), property.to_string(), s));
    }

    /// One operation: `method` (`get`, `post`, …) on `path` as axum routes it (`/api/kbs/{id}`).
    /// It is registered when the returned builder is dropped. Every operation needs a signed-in
    /// caller (bearer token or session) unless [`Op::public`] says otherwise, and may answer
    /// the common errors ([`COMMON_ERRORS`]); path parameters are UUIDs unless
    /// [`Op::string_param`] says otherwise.
    pub fn op(&mut self, method: &str, path: &str) -> Op<'_> {
        let params = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string", "format": "uuid"}}))
            .collect();
        Op {
            doc: self,
            method: method.to_ascii_lowercase(),
            path: path.to_string(),
            summary: String::new(),
            params,
            body: None,
            responses: BTreeMap::new(),
            errors: BTreeMap::new(),
            public: false,
            session_only: false,
        }
    }

    /// The OpenAPI 3.1 document.
    pub fn finish(mut self) -> Value {
        let mut schemas = self.out.take_definitions(true);
        for (schema, property, s) in std::mem::take(&mut self.properties) {
            if let Some(p) = schemas.get_mut(&schema).and_then(|v| v.pointer_mut(&format!("/properties/{property}"))) {
                *p = s;
            }
        }
        let input = self.input.take_definitions(true);
        // A type read and written alike is one schema; one whose input form differs (fields
        // with defaults, say) is `<Name>Input`, and the input references follow it.
        let mut renamed = BTreeMap::new();
        for (name, schema) in &input {
            match schemas.get(name) {
                Some(s) if s != schema => {
                    renamed.insert(name.clone(), format!("{name}Input"));
                }
                _ => {}
            }
        }
        for (name, mut schema) in input {
            rename_refs(&mut schema, &renamed);
            let name = renamed.get(&name).cloned().unwrap_or(name);
            schemas.insert(name, schema);
        }
        let mut paths = Map::new();
        for (path, mut ops) in std::mem::take(&mut self.paths) {
            for op in ops.values_mut() {
                if let Some(body) = op.pointer_mut("/requestBody") {
                    rename_refs(body, &renamed);
                }
                if let Some(params) = op.pointer_mut("/parameters") {
                    rename_refs(params, &renamed);
                }
            }
            paths.insert(path, Value::Object(ops));
        }
        json!({
            "openapi": "3.1.0",
            "info": {
                "title": "MNote Evidence Server API",
                "version": env!("CARGO_PKG_VERSION"),
                "description": "Multi-tenant evidence search with exact citations. Authenticate with an API token \
                    (`Authorization: Bearer mnote_…`, created at /settings/tokens or `POST /api/tokens`) or the \
                    browser session cookie (state-changing requests with a cookie also need the CSRF token). \
                    Every error answers `{\"error\": {\"code\", \"message\"}}` with a stable `code`; \
                    docs/API.md describes each route.",
            },
            "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
            "paths": paths,
            "components": {
                "schemas": schemas,
                "responses": std::mem::take(&mut self.errors),
                "securitySchemes": {
                    "bearer": {"type": "http", "scheme": "bearer", "description": "an API token `mnote_<tenant>_<secret>`"},
                    "session": {"type": "apiKey", "in": "cookie", "name": SESSION_COOKIE},
                },
            },
            "security": [{"bearer": []}, {"session": []}],
        })
    }
}

fn rename_refs(v: &mut Value, renamed: &BTreeMap<String, String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get_mut("$ref")
                && let Some(name) = r.strip_prefix("#/components/schemas/")
                && let Some(new) = renamed.get(name)
            {
                *r = format!("#/components/schemas/{new}");
            }
            m.values_mut().for_each(|x| rename_refs(x, renamed));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rename_refs(x, renamed)),
        _ => {}
    }
}

/// What any signed-in operation may answer: no or a bad credential, a refused CSRF check or
/// role, a path or query that does not parse, the database gone, a server fault.
pub const COMMON_ERRORS: &[(u16, &[&str])] = &[
    (401, &["unauthorized", "token_expired"]),
    (403, &["forbidden", "csrf_failed"]),
    (422, &["invalid_input"]),
    (500, &["internal", "stored_value_unreadable"]),
    (503, &["upstream_unavailable"]),
];

/// One operation being described (registered on drop).
pub struct Op<'a> {
    doc: &'a mut ApiDoc,
    method: String,
    path: String,
    summary: String,
    params: Vec<Value>,
    body: Option<Value>,
    responses: BTreeMap<u16, Value>,
    errors: BTreeMap<u16, Vec<&'static str>>,
    public: bool,
    session_only: bool,
}

impl Op<'_> {
    pub fn summary(mut self, s: &str) -> Self {
        self.summary = s.to_string();
        self
    }

    /// A JSON answer of type `T` with this status.
    pub fn ok<T: JsonSchema>(mut self, status: u16) -> Self {
        let schema = self.doc.out.subschema_for::<T>().to_value();
        self.responses
            .insert(status, json!({"description": reason(status), "content": {"application/json": {"schema": schema}}}));
        self
    }

    /// A JSON answer that is either an `A` or a `B`.
    pub fn ok_either<A: JsonSchema, B: JsonSchema>(mut self, status: u16) -> Self {
        let schema = json!({"anyOf": [self.doc.out.subschema_for::<A>(), self.doc.out.subschema_for::<B>()]});
        self.responses
            .insert(status, json!({"description": reason(status), "content": {"application/json": {"schema": schema}}}));
        self
    }

    /// An answer without a body (`204 No Content`).
    pub fn empty(mut self, status: u16) -> Self {
        self.responses.insert(status, json!({"description": reason(status)}));
        self
    }

    /// An answer that is not JSON of a handler type: its media type and schema (beside the
    /// JSON one when the status has one already: the client picks with `Accept`).
    pub fn content(mut self, status: u16, media: &str, schema: Value, description: &str) -> Self {
        let r = self.responses.entry(status).or_insert_with(|| json!({"description": reason(status), "content": {}}));
        r["content"][media] = json!({"schema": schema});
        let d = r["description"].as_str().unwrap_or_default().to_string();
        r["description"] = format!("{d}; {description}").into();
        self
    }

    /// The JSON request body, of type `T`.
    pub fn body<T: JsonSchema>(mut self) -> Self {
        let schema = self.doc.input.subschema_for::<T>().to_value();
        self.body = Some(json!({"required": true, "content": {"application/json": {"schema": schema}}}));
        self.errors.entry(413).or_default().push("body_too_large");
        self
    }

    /// A request body that is not JSON (a multipart upload).
    pub fn raw_body(mut self, media: &str, schema: Value) -> Self {
        self.body = Some(json!({"required": true, "content": {media: {"schema": schema}}}));
        self
    }

    /// The query string, read as `T` (an object of scalars): one parameter per field.
    pub fn query<T: JsonSchema>(mut self) -> Self {
        let mut g = settings().for_deserialize().with(|s| s.inline_subschemas = true).into_generator();
        let schema = g.root_schema_for::<T>().to_value();
        let required: Vec<&str> =
            schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (name, s) in props {
                let mut s = s.clone();
                let description = s.as_object_mut().and_then(|m| m.remove("description"));
                let mut p = json!({"name": name, "in": "query", "required": required.contains(&name.as_str()), "schema": s});
                if let Some(d) = description {
                    p["description"] = d;
                }
                self.params.push(p);
            }
        }
        self
    }

    /// One header parameter (a string).
    pub fn header(mut self, name: &str, description: &str) -> Self {
        self.params.push(
            json!({"name": name, "in": "header", "required": false, "description": description, "schema": {"type": "string"}}),
        );
        self
    }

    /// Path parameters that are free text, not UUIDs.
    pub fn string_param(mut self, name: &str) -> Self {
        for p in &mut self.params {
            if p["in"] == "path" && p["name"] == name {
                p["schema"] = json!({"type": "string", "minLength": 1});
            }
        }
        self
    }

    /// Errors beyond [`COMMON_ERRORS`]: `(status, codes)`.
    pub fn errors(mut self, errors: &[(u16, &[&'static str])]) -> Self {
        for (status, codes) in errors {
            self.errors.entry(*status).or_default().extend(codes.iter().copied());
        }
        self
    }

    /// No credential needed.
    pub fn public(mut self) -> Self {
        self.public = true;
        self
    }

    /// Only a browser session (its cookie) is accepted, never a token.
    pub fn session_only(mut self) -> Self {
        self.session_only = true;
        self
    }
}

impl Drop for Op<'_> {
    fn drop(&mut self) {
        let mut errors = std::mem::take(&mut self.errors);
        let has_path_params = self.params.iter().any(|p| p["in"] == "path");
        for (status, codes) in COMMON_ERRORS {
            if self.public && matches!(status, 401 | 403) {
                continue;
            }
            errors.entry(*status).or_default().extend(codes.iter().copied());
        }
        if has_path_params && !self.public {
            errors.entry(404).or_default().push("not_found");
        }
        let error_ref = self.doc.out.subschema_for::<ErrorBody>().to_value();
        let mut responses = Map::new();
        for (status, r) in std::mem::take(&mut self.responses) {
            responses.insert(status.to_string(), r);
        }
        for (status, mut codes) in errors {
            codes.sort_unstable();
            codes.dedup();
            // `404_not_found`: shared by every operation answering this status with these codes.
            let name = format!("{status}_{}", codes.join("_"));
            if !self.doc.errors.contains_key(&name) {
                let schema = json!({
                    "allOf": [error_ref, {"properties": {"error": {"properties": {"code": {"enum": codes}}}}}]
                });
                let description = format!("{}: {}", reason(status), codes.join(", "));
                self.doc.errors.insert(
                    name.clone(),
                    json!({"description": description, "content": {"application/json": {"schema": schema}}}),
                );
            }
            responses.insert(status.to_string(), json!({"$ref": format!("#/components/responses/{name}")}));
        }
        let mut op = Map::new();
        op.insert("operationId".into(), operation_id(&self.method, &self.path).into());
        op.insert("summary".into(), std::mem::take(&mut self.summary).into());
        let tag = self.path.trim_start_matches("/api/").split('/').next().unwrap_or("api").to_string();
        op.insert("tags".into(), json!([tag]));
        if !self.params.is_empty() {
            op.insert("parameters".into(), Value::Array(std::mem::take(&mut self.params)));
        }
        if let Some(b) = self.body.take() {
            op.insert("requestBody".into(), b);
        }
        op.insert("responses".into(), Value::Object(responses));
        if self.public {
            op.insert("security".into(), json!([]));
        } else if self.session_only {
            op.insert("security".into(), json!([{"session": []}]));
        }
        let ops = self.doc.paths.entry(self.path.clone()).or_default();
        assert!(ops.insert(self.method.clone(), Value::Object(op)).is_none(), "{} {} documented twice", self.method, self.path);
    }
}

/// `get_api_kbs_id_members_user` for `GET /api/kbs/{id}/members/{user}`.
fn operation_id(method: &str, path: &str) -> String {
    let words: Vec<&str> = path.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
    format!("{method}_{}", words.join("_"))
}

fn reason(status: u16) -> String {
    axum::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .map(str::to_string)
        .unwrap_or_else(|| status.to_string())
}
