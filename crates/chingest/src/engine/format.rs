//! The output formats the engine can produce, by the names ClickHouse
//! uses: a statement's format as its caller names it (any case, the
//! engine's short `TSV…` names) to chdb-rust's.

use crate::error::{Error, Result};

/// The engine's output formats, named here so that the rest of the crate
/// reaches chdb-rust only through the engine module.
pub(crate) use chdb_rust::format::OutputFormat;

/// Every output format the engine can produce, by the name ClickHouse uses.
pub(crate) fn output_format(name: &str) -> Result<OutputFormat> {
    use OutputFormat::*;
    const ALL: &[OutputFormat] = &[
        TabSeparated,
        TabSeparatedRaw,
        TabSeparatedWithNames,
        TabSeparatedWithNamesAndTypes,
        TabSeparatedRawWithNames,
        TabSeparatedRawWithNamesAndTypes,
        Template,
        CSV,
        CSVWithNames,
        CSVWithNamesAndTypes,
        CustomSeparated,
        CustomSeparatedWithNames,
        CustomSeparatedWithNamesAndTypes,
        Values,
        JSON,
        JSONStrings,
        JSONColumns,
        JSONColumnsWithMetadata,
        JSONCompact,
        JSONCompactStrings,
        JSONCompactColumns,
        JSONEachRow,
        PrettyJSONEachRow,
        JSONEachRowWithProgress,
        JSONStringsEachRow,
        JSONStringsEachRowWithProgress,
        JSONCompactEachRow,
        JSONCompactEachRowWithNames,
        JSONCompactEachRowWithNamesAndTypes,
        JSONCompactStringsEachRow,
        JSONCompactStringsEachRowWithNames,
        JSONCompactStringsEachRowWithNamesAndTypes,
        JSONObjectEachRow,
        BSONEachRow,
        TSKV,
        Pretty,
        PrettyNoEscapes,
        PrettyMonoBlock,
        PrettyNoEscapesMonoBlock,
        PrettyCompact,
        PrettyCompactNoEscapes,
        PrettyCompactMonoBlock,
        PrettyCompactNoEscapesMonoBlock,
        PrettySpace,
        PrettySpaceNoEscapes,
        PrettySpaceMonoBlock,
        PrettySpaceNoEscapesMonoBlock,
        Prometheus,
        Protobuf,
        ProtobufSingle,
        ProtobufList,
        Avro,
        Parquet,
        Arrow,
        ArrowStream,
        ORC,
        Npy,
        RowBinary,
        RowBinaryWithNames,
        RowBinaryWithNamesAndTypes,
        Native,
        Null,
        XML,
        CapnProto,
        LineAsString,
        RawBLOB,
        MsgPack,
        Markdown,
        Vertical,
    ];
    // The engine's short names: TSV, TSVWithNames, TSVRaw, …
    let full = match name.get(..3) {
        Some(prefix) if prefix.eq_ignore_ascii_case("TSV") => format!("TabSeparated{}", &name[3..]),
        _ => name.to_owned(),
    };
    ALL.iter()
        .copied()
        .find(|format| format.as_str().eq_ignore_ascii_case(&full))
        .ok_or_else(|| Error::UnknownFormat(name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_found_by_any_case_and_the_engine_s_short_names() {
        let name = |format: &str| output_format(format).unwrap().as_str();
        assert_eq!(name("json"), "JSON");
        assert_eq!(name("TSVWithNames"), "TabSeparatedWithNames");
        assert_eq!(name("tsv"), "TabSeparated");
        assert!(matches!(
            output_format("Nope"),
            Err(Error::UnknownFormat(_))
        ));
    }
}
