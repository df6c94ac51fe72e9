-- One typed pass over a batch of OTLP/JSON lines files (ExportTraceServiceRequest
-- per line): the only place the raw JSON is parsed. Attribute values become
-- text (stringValue / intValue / doubleValue / boolValue as written, bytesValue as its base64; arrayValue
-- and kvlistValue as their OTLP JSON). Ids that are not lowercase hex of the
-- right length are kept here and handled by the caller (check_stage,
-- ingest.sql): a file with uppercase ids is read again with lowercase := true.
-- Every request yields at least one row (span columns NULL when it holds no
-- span), so the caller can count the lines read without a second pass (WITH
-- ORDINALITY would do it too, at the price of an ordered, slower scan).
-- name: or_null_macro
CREATE OR REPLACE TEMP MACRO _or_null(items) AS CASE WHEN len(items) > 0 THEN items ELSE [NULL] END;

-- name: read_batch_macro
-- The typed read of a list of files, as a table: the stage is created and
-- filled from it (ingest.sql).
-- object_size is raised only for the good-lines copy of a file with a line
-- longer than the default allows (Analyzer._stage_copy).
-- bundled names the files of a bundle (many small files in one, each line
-- tagged with its file's position in the list as toolspanFile, see
-- _inputs.write_bundle): reading one file each cost ~1 ms per file.
-- slow is true for the reads of the slow paths (a file read again, a good-lines
-- copy, a line alone): ids are lowercased there, and every span keeps its own
-- key list, since single spans may be removed from the stage afterwards.
CREATE OR REPLACE TEMP MACRO _read_batch(files, object_size := 16777216, bundled := [], slow := false) AS TABLE
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
                resource STRUCT(attributes STRUCT(key VARCHAR, value STRUCT(stringValue VARCHAR, intValue VARCHAR, doubleValue VARCHAR, boolValue VARCHAR, bytesValue VARCHAR, arrayValue JSON, kvlistValue JSON))[]),
                scopeSpans STRUCT(
                    scope STRUCT(name VARCHAR),
                    spans STRUCT(
                        traceId VARCHAR, spanId VARCHAR, parentSpanId VARCHAR, name VARCHAR, kind VARCHAR,
                        startTimeUnixNano VARCHAR, endTimeUnixNano VARCHAR,
                        attributes STRUCT(key VARCHAR, value STRUCT(stringValue VARCHAR, intValue VARCHAR, doubleValue VARCHAR, boolValue VARCHAR, bytesValue VARCHAR, arrayValue JSON, kvlistValue JSON))[],
                        status STRUCT(code VARCHAR, message VARCHAR),
                        events STRUCT(name VARCHAR, attributes STRUCT(key VARCHAR, value STRUCT(stringValue VARCHAR))[])[]
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
scope_group AS (
    -- Each span's shape (the hash of its list of attribute keys), and the list
    -- of keys of each distinct shape of the group (from its first span with
    -- it): a handful per group, where a list per span cost more to store than
    -- the texts. Both are unnested beside the spans (a value of the group read
    -- on every span row is copied to every row; list_distinct over the lists
    -- themselves cost more than the whole read).
    SELECT
        *,
        list_transform(scope_spans.spans, lambda x: CASE
            WHEN x.attributes IS NOT NULL THEN hash(list_transform(x.attributes, lambda a: a.key))
        END) AS shapes
    FROM scope
),
scope_keys AS (
    SELECT
        *,
        list_transform(
            list_distinct(shapes),
            lambda shape: list_transform(scope_spans.spans[list_position(shapes, shape)].attributes, lambda a: a.key)
        ) AS group_key_lists
    FROM scope_group
),
span AS (
    SELECT
        source_file, resource_no, scope_no, service_name, scope_spans.scope.name AS scope_name,
        unnest(_or_null(scope_spans.spans)) AS s,
        unnest(_or_null(shapes)) AS attribute_shape,
        -- The group's key lists on its first row, NULL on the others.
        unnest(_or_null(list_resize([group_key_lists], len(scope_spans.spans)))) AS group_key_lists,
        generate_subscripts(_or_null(scope_spans.spans), 1) AS span_no
    FROM scope_keys
)
SELECT
    -- Lowercasing every id cost ~0.3 CPU s per 1M spans; ids are lowercase hex
    -- nearly always, so only a file that has other ids is read lowercased.
    CASE WHEN slow THEN lower(s.traceId) ELSE s.traceId END AS trace_id,
    CASE WHEN slow THEN lower(s.spanId) ELSE s.spanId END AS span_id,
    nullif(CASE WHEN slow THEN lower(s.parentSpanId) ELSE s.parentSpanId END, '') AS parent_span_id,
    s.name AS name,
    CASE replace(upper(s.kind), 'SPAN_KIND_', '')
        WHEN '0' THEN 'UNSPECIFIED' WHEN '1' THEN 'INTERNAL' WHEN '2' THEN 'SERVER'
        WHEN '3' THEN 'CLIENT' WHEN '4' THEN 'PRODUCER' WHEN '5' THEN 'CONSUMER'
        ELSE coalesce(replace(upper(s.kind), 'SPAN_KIND_', ''), 'UNSPECIFIED')
    END AS kind,
    TRY_CAST(s.startTimeUnixNano AS BIGINT) AS start_ns,
    TRY_CAST(s.endTimeUnixNano AS BIGINT) AS end_ns,
    -- A time given must be nanoseconds since 1970 that fit a BIGINT; absent or
    -- empty is unknown. Other spans are reported (check_stage, ingest.sql).
    (start_ns >= 0 OR nullif(s.startTimeUnixNano, '') IS NULL)
        AND (end_ns >= 0 OR nullif(s.endTimeUnixNano, '') IS NULL) AS times_ok,
    CASE replace(upper(s.status.code), 'STATUS_CODE_', '')
        WHEN '1' THEN 'OK' WHEN '2' THEN 'ERROR' WHEN 'OK' THEN 'OK' WHEN 'ERROR' THEN 'ERROR'
        ELSE 'UNSET'
    END AS status_code,
    nullif(s.status.message, '') AS status_message,
    service_name,
    scope_name,
    -- Attributes are kept as a shape (the hash of the span's list of keys) and
    -- the list of texts in that order: the list of keys is stored once per
    -- distinct list (attribute_shapes, from attribute_key_lists), not per span,
    -- and building a MAP costs more than the whole typed read, so the spans
    -- view builds it only for the rows it returns; lookups (_attribute) are a
    -- list_position. NULL and duplicate keys are found by check_stage.
    attribute_shape,
    list_transform(s.attributes, lambda a: coalesce(
        a.value.stringValue, a.value.intValue, a.value.doubleValue, a.value.boolValue, a.value.bytesValue,
        a.value.arrayValue::VARCHAR, a.value.kvlistValue::VARCHAR)) AS attribute_vals,
    -- The first exception event's exception.type ('exception' when it names
    -- none): how instrumentations that set no error.type report a failure.
    list_transform(
        list_filter(s.events, lambda e: e.name = 'exception'),
        lambda e: coalesce(
            nullif(list_filter(e.attributes, lambda a: a.key = 'exception.type')[1].value.stringValue, ''),
            'exception'))[1] AS exception_type,
    -- Strands Agents writes a tool call's arguments and result only in its
    -- execute_tool span's events (gen_ai.tool.message content, gen_ai.choice
    -- message): kept for those spans alone (other spans' events repeat the
    -- conversation's messages).
    CASE WHEN starts_with(s.name, 'execute_tool') THEN
        list_filter(
            list_filter(s.events, lambda e: e.name = 'gen_ai.tool.message')[1].attributes,
            lambda a: a.key = 'content')[1].value.stringValue
    END AS event_arguments,
    CASE WHEN starts_with(s.name, 'execute_tool') THEN
        list_filter(
            list_filter(s.events, lambda e: e.name = 'gen_ai.choice')[1].attributes,
            lambda a: a.key = 'message')[1].value.stringValue
    END AS event_result,
    -- On the first row of each group of spans (the slow paths: on every row,
    -- the span's own list): the key lists the shapes stand for.
    CASE WHEN slow THEN [list_transform(s.attributes, lambda a: a.key)] ELSE group_key_lists END AS attribute_key_lists,
    source_file,
    -- The first row of every request: counting them counts the lines read.
    resource_no = 1 AND scope_no = 1 AND span_no = 1 AS first_of_line,
    s IS NOT NULL AS has_span
FROM span;
