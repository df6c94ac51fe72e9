-- One typed pass over a batch of OTLP/JSON lines files (ExportTraceServiceRequest
-- per line): the only place the raw JSON is parsed. Attribute values become
-- text (stringValue / intValue / doubleValue / boolValue as written; arrayValue
-- and kvlistValue as their OTLP JSON). Ids are lowercased; ids that are not hex
-- of the right length are kept here and rejected by the caller. Every request
-- yields at least one row (span columns NULL when it holds no span), so the
-- caller can count the lines read without a second pass (WITH ORDINALITY would
-- do it too, at the price of an ordered, slower scan).
-- name: or_null_macro
CREATE OR REPLACE TEMP MACRO _or_null(items) AS CASE WHEN len(items) > 0 THEN items ELSE [NULL] END;

-- name: attribute_macro
-- One attribute's text (NULL when absent): far cheaper than building a MAP.
CREATE OR REPLACE TEMP MACRO _attribute(attribute_kv, attribute_key) AS
    attribute_kv.vals[list_position(attribute_kv.keys, attribute_key)];

-- name: read_batch_macro
-- The typed read of a list of files, as a table: the stage is created and
-- filled from it (ingest.sql).
-- object_size is raised only for the good-lines copy of a file with a line
-- longer than the default allows (Analyzer._stage_copy).
-- bundled names the files of a bundle (many small files in one, each line
-- tagged with its file's position in the list as toolspanFile, see
-- _inputs.write_bundle): reading one file each cost ~1 ms per file.
CREATE OR REPLACE TEMP MACRO _read_batch(files, object_size := 16777216, bundled := []) AS TABLE
WITH request AS (
    SELECT
        coalesce(bundled[toolspanFile], filename) AS source_file,
        unnest(_or_null(resourceSpans)) AS resource_spans,
        generate_subscripts(_or_null(resourceSpans), 1) AS resource_no
    FROM read_json(
        files,
        format = 'newline_delimited',
        records = true,
        filename = true,
        -- The read buffer size, which is also the unit of parallelism: 16 MB
        -- lets two threads share one file (256 MB made every file one buffer,
        -- read by one thread, at half the speed). Longer lines still read
        -- (tests/analyzer/test_analyzer_storage.py).
        maximum_object_size = object_size,
        columns = {
            'toolspanFile': 'BIGINT',
            'resourceSpans': 'STRUCT(
                resource STRUCT(attributes STRUCT(key VARCHAR, value STRUCT(stringValue VARCHAR, intValue VARCHAR, doubleValue VARCHAR, boolValue VARCHAR, arrayValue JSON, kvlistValue JSON))[]),
                scopeSpans STRUCT(
                    scope STRUCT(name VARCHAR),
                    spans STRUCT(
                        traceId VARCHAR, spanId VARCHAR, parentSpanId VARCHAR, name VARCHAR, kind VARCHAR,
                        startTimeUnixNano VARCHAR, endTimeUnixNano VARCHAR,
                        attributes STRUCT(key VARCHAR, value STRUCT(stringValue VARCHAR, intValue VARCHAR, doubleValue VARCHAR, boolValue VARCHAR, arrayValue JSON, kvlistValue JSON))[],
                        status STRUCT(code VARCHAR, message VARCHAR)
                    )[]
                )[]
            )[]'
        }
    )
),
scope AS (
    SELECT
        source_file,
        resource_no,
        list_filter(resource_spans.resource.attributes, lambda a: a.key = 'service.name')[1].value.stringValue AS service_name,
        unnest(_or_null(resource_spans.scopeSpans)) AS scope_spans,
        generate_subscripts(_or_null(resource_spans.scopeSpans), 1) AS scope_no
    FROM request
),
span AS (
    SELECT
        source_file, resource_no, scope_no, service_name, scope_spans.scope.name AS scope_name,
        unnest(_or_null(scope_spans.spans)) AS s,
        generate_subscripts(_or_null(scope_spans.spans), 1) AS span_no
    FROM scope
),
SELECT
    lower(s.traceId) AS trace_id,
    lower(s.spanId) AS span_id,
    nullif(lower(s.parentSpanId), '') AS parent_span_id,
    s.name AS name,
    CASE replace(upper(s.kind), 'SPAN_KIND_', '')
        WHEN '0' THEN 'UNSPECIFIED' WHEN '1' THEN 'INTERNAL' WHEN '2' THEN 'SERVER'
        WHEN '3' THEN 'CLIENT' WHEN '4' THEN 'PRODUCER' WHEN '5' THEN 'CONSUMER'
        ELSE coalesce(replace(upper(s.kind), 'SPAN_KIND_', ''), 'UNSPECIFIED')
    END AS kind,
    TRY_CAST(s.startTimeUnixNano AS BIGINT) AS start_ns,
    TRY_CAST(s.endTimeUnixNano AS BIGINT) AS end_ns,
    -- A time given must be nanoseconds since 1970 that fit a BIGINT; absent or
    -- empty is unknown. Other spans are reported (suspect_files, ingest.sql).
    (start_ns >= 0 OR nullif(s.startTimeUnixNano, '') IS NULL)
        AND (end_ns >= 0 OR nullif(s.endTimeUnixNano, '') IS NULL) AS times_ok,
    CASE replace(upper(s.status.code), 'STATUS_CODE_', '')
        WHEN '1' THEN 'OK' WHEN '2' THEN 'ERROR' WHEN 'OK' THEN 'OK' WHEN 'ERROR' THEN 'ERROR'
        ELSE 'UNSET'
    END AS status_code,
    nullif(s.status.message, '') AS status_message,
    service_name,
    scope_name,
    -- Kept as parallel lists of keys and texts: building a MAP costs more than
    -- the whole typed read, so the spans view builds it only for the rows it
    -- returns, and lookups (_attribute) are a list_position. NULL and duplicate
    -- keys are found by suspect_files (ingest.sql).
    {
        'keys': list_transform(s.attributes, lambda a: a.key),
        'vals': list_transform(s.attributes, lambda a: coalesce(
            a.value.stringValue, a.value.intValue, a.value.doubleValue, a.value.boolValue,
            a.value.arrayValue::VARCHAR, a.value.kvlistValue::VARCHAR))
    } AS attribute_kv,
    source_file,
    -- The first row of every request: counting them counts the lines read.
    resource_no = 1 AND scope_no = 1 AND span_no = 1 AS first_of_line,
    s IS NOT NULL AS has_span
FROM span;
