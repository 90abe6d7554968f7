/*
 * The chDB C API that chingest builds against: libchdb 26.7.3
 * (npm package @chdb/lib-linux-x64-gnu@26.7.3-stable.1).
 *
 * chdb-rust generates its bindings from this header (CHDB_INCLUDE_DIR in
 * .cargo/config.toml). It declares the functions chdb-rust calls on this engine
 * version and nothing more. Every function declared here must be exported by the
 * fetched library; crates/chingest/tests/engine_abi.rs checks that, so a version
 * bump that drops or renames a symbol fails loudly instead of at link or run time.
 *
 * Conventions of the API, as relied on by chingest:
 *   - A connection serializes the statements run on it; separate connections to
 *     the one process-wide engine run concurrently.
 *   - Every chdb_result returned must be released with chdb_destroy_query_result.
 *   - Functions with an `_n` suffix take explicit lengths and are binary-safe.
 */
#ifndef CHINGEST_CHDB_H
#define CHINGEST_CHDB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Handles and enums ------------------------------------------------- */

/* Outcome of calls that do not return a result object. */
typedef enum chdb_state {
    CHDBSuccess = 0,
    CHDBError = 1
} chdb_state;

/* A statement's effect on state that outlives it (chdb_classify_query_n). The
 * values ascend with how restricted a statement is. */
typedef enum chdb_query_class {
    CHDB_QUERY_READ_ONLY = 0,       /* SELECT, SHOW, DESCRIBE, EXPLAIN, ... */
    CHDB_QUERY_MUTATING = 1,        /* INSERT, CREATE, ALTER, DROP, ... */
    CHDB_QUERY_MUTATING_GLOBAL = 2, /* functions, users, named collections, system.* */
    CHDB_QUERY_CONTROL = 3,         /* USE, SET, SYSTEM, KILL, INTO OUTFILE, ... */
    CHDB_QUERY_UNKNOWN = 4          /* did not parse: treat as refused */
} chdb_query_class;

/* Extra facts reported by chdb_classify_query_n, OR-ed into `flags`. */
typedef enum chdb_query_analysis_flag {
    CHDB_QUERY_HAS_SECRETS = 1u << 0,
    CHDB_QUERY_WRITES_ONLY_TARGET_DATABASE = 1u << 1,
    CHDB_QUERY_CHANGES_DATABASE_LIFECYCLE = 1u << 2
} chdb_query_analysis_flag;

/* Report of chdb_classify_query_n. The caller sets struct_size. */
typedef struct chdb_query_analysis_v1 {
    uint32_t struct_size;
    uint32_t statement_count;
    uint32_t flags;       /* chdb_query_analysis_flag bits */
    uint32_t query_class; /* a chdb_query_class value */
} chdb_query_analysis_v1;

/* Opaque engine-owned objects; only ever handled through pointers. */
typedef struct chdb_result_ { void * internal_data; } chdb_result;
typedef struct chdb_connection_ { void * internal_data; } * chdb_connection;
typedef struct chdb_insert_stream_ { void * internal_data; } * chdb_insert_stream;

/* Arrow C Data Interface objects passed through as opaque handles: they point
 * at ArrowArrayStream, ArrowSchema and ArrowArray structs owned by the caller. */
typedef struct chdb_arrow_stream_ { void * internal_data; } * chdb_arrow_stream;
typedef struct chdb_arrow_schema_ { void * internal_data; } * chdb_arrow_schema;
typedef struct chdb_arrow_array_ { void * internal_data; } * chdb_arrow_array;

/* Type mapping of Arrow exports; NULL means the engine's defaults
 * (0, 0, 1). */
typedef struct chdb_arrow_options {
    int unsupported_as_binary;
    int low_cardinality_as_dictionary;
    int string_as_string;
} chdb_arrow_options;

/* ---- Engine and connections -------------------------------------------- */

/* The release of the linked library, e.g. "26.7.3". */
const char * chdb_version(void);

/* Opens a connection. argv holds command-line style options, e.g.
 * "--path=<dir>" for the data directory (one path per process). Returns NULL,
 * or a pointer to a NULL connection, on failure. */
chdb_connection * chdb_connect(int argc, char ** argv);

/* Closes a connection opened by chdb_connect. */
void chdb_close_conn(chdb_connection * conn);

/* Stops every engine thread; refused while a connection is open. */
chdb_state chdb_shutdown(void);

/* Whether the engine installs process-wide signal handlers (call before the
 * first connect), and a reset of handlers already installed. */
void chdb_set_signal_handlers_enabled(int enabled);
void chdb_reset_signal_handlers(void);

/* ---- Queries ------------------------------------------------------------ */

chdb_result * chdb_query_n(
    chdb_connection conn, const char * query, size_t query_len,
    const char * format, size_t format_len);

/* {name:Type} placeholders bound by the engine, never spliced into the SQL. */
chdb_result * chdb_query_with_params_n(
    chdb_connection conn, const char * query, size_t query_len,
    const char * format, size_t format_len,
    const char * const * param_names, const size_t * param_name_lens,
    const char * const * param_values, const size_t * param_value_lens,
    size_t param_count);

/* Result accessors. */
char * chdb_result_buffer(chdb_result * result);
size_t chdb_result_length(chdb_result * result);
double chdb_result_elapsed(chdb_result * result);
uint64_t chdb_result_rows_read(chdb_result * result);
uint64_t chdb_result_bytes_read(chdb_result * result);
uint64_t chdb_result_storage_rows_read(chdb_result * result);
uint64_t chdb_result_storage_bytes_read(chdb_result * result);
uint64_t chdb_result_rows_written(chdb_result * result);
uint64_t chdb_result_bytes_written(chdb_result * result);
/* NULL when the statement succeeded. */
const char * chdb_result_error(chdb_result * result);
void chdb_destroy_query_result(chdb_result * result);

/* ---- Streaming queries -------------------------------------------------- */

chdb_result * chdb_stream_query(chdb_connection conn, const char * query, const char * format);
chdb_result * chdb_stream_query_n(
    chdb_connection conn, const char * query, size_t query_len,
    const char * format, size_t format_len);
chdb_result * chdb_stream_query_with_params_n(
    chdb_connection conn, const char * query, size_t query_len,
    const char * format, size_t format_len,
    const char * const * param_names, const size_t * param_name_lens,
    const char * const * param_values, const size_t * param_value_lens,
    size_t param_count);
/* The next chunk; an empty result once the stream is exhausted. */
chdb_result * chdb_stream_fetch_result(chdb_connection conn, chdb_result * result);
void chdb_stream_cancel_query(chdb_connection conn, chdb_result * result);

/* ---- Streaming inserts -------------------------------------------------- */

/* `query` is an INSERT without data; chunks in `format` follow through
 * chdb_stream_append. Never returns NULL: check chdb_stream_insert_error. */
chdb_insert_stream chdb_stream_insert_n(
    chdb_connection conn, const char * query, size_t query_len,
    const char * format, size_t format_len);
chdb_insert_stream chdb_stream_insert_with_params_n(
    chdb_connection conn, const char * query, size_t query_len,
    const char * format, size_t format_len,
    const char * const * param_names, const size_t * param_name_lens,
    const char * const * param_values, const size_t * param_value_lens,
    size_t param_count);
chdb_state chdb_stream_append(chdb_insert_stream stream, const void * data, size_t len);
chdb_result * chdb_stream_done(chdb_insert_stream stream);
void chdb_stream_cancel_insert(chdb_insert_stream stream);
const char * chdb_stream_insert_error(chdb_insert_stream stream);
void chdb_destroy_insert_stream(chdb_insert_stream stream);

/* ---- Arrow -------------------------------------------------------------- */

/* The whole result exported into a caller-allocated ArrowArrayStream. */
chdb_result * chdb_query_arrow_n(
    chdb_connection conn, const char * query, size_t query_len,
    chdb_arrow_stream out_stream, const chdb_arrow_options * options);

/* A result streamed as record batches, fetched one per call. */
chdb_result * chdb_stream_query_arrow_n(
    chdb_connection conn, const char * query, size_t query_len,
    const chdb_arrow_options * options);
chdb_result * chdb_stream_query_arrow_with_params_n(
    chdb_connection conn, const char * query, size_t query_len,
    const chdb_arrow_options * options,
    const char * const * param_names, const size_t * param_name_lens,
    const char * const * param_values, const size_t * param_value_lens,
    size_t param_count);
chdb_state chdb_stream_fetch_arrow(
    chdb_connection conn, chdb_result * stream_result, chdb_arrow_stream out_batch);

/* Registers caller data under `table_name` for the ArrowStream('name') table
 * function. Names are engine-global and a registration is read once. */
chdb_state chdb_arrow_scan(
    chdb_connection conn, const char * table_name, chdb_arrow_stream arrow_stream);
chdb_state chdb_arrow_array_scan(
    chdb_connection conn, const char * table_name,
    chdb_arrow_schema arrow_schema, chdb_arrow_array arrow_array);
chdb_state chdb_arrow_unregister_table(chdb_connection conn, const char * table_name);

/* ---- Backup, restore, statement classification -------------------------- */

/* Database backup into / restore from one archive file (absolute paths under
 * the backups.allowed_path setting). base_file_path NULL: a full backup. */
chdb_result * chdb_backup_database_n(
    chdb_connection conn, const char * database, size_t database_len,
    const char * file_path, size_t file_path_len,
    const char * base_file_path, size_t base_file_path_len);
chdb_result * chdb_restore_database_n(
    chdb_connection conn, const char * database, size_t database_len,
    const char * file_path, size_t file_path_len);

/* Parses `sql` without running it and reports its class, statement count and
 * flags. Unparseable SQL reports CHDB_QUERY_UNKNOWN and still succeeds. */
chdb_state chdb_classify_query_n(
    chdb_connection conn, const char * sql, size_t sql_len,
    const char * target_database, size_t target_database_len,
    chdb_query_analysis_v1 * out_analysis);

#ifdef __cplusplus
}
#endif

#endif /* CHINGEST_CHDB_H */
