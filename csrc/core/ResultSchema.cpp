#include "core/ResultSchema.h"

#include <limits>
#include <stdexcept>

namespace torchutil {
namespace {

struct NamedSchema {
  const char* name;
  std::vector<FieldSpec> fields;
};

// Built on first use, so that a table made during another file's static initialization
// finds its schema.
const std::vector<NamedSchema>& schemas() {
#define TORCHUTIL_SCHEMA_SPEC(name, kind, doc) FieldSpec{#name, ValueKind::kind, doc},
  static const std::vector<NamedSchema> all{
      {"summary", {TORCHUTIL_RESULT_FIELDS(TORCHUTIL_SCHEMA_SPEC)}},
      {"ops", {TORCHUTIL_OP_FIELDS(TORCHUTIL_SCHEMA_SPEC)}},
      {"kernels", {TORCHUTIL_KERNEL_FIELDS(TORCHUTIL_SCHEMA_SPEC)}},
      {"unknown_ops", {TORCHUTIL_UNKNOWN_OP_FIELDS(TORCHUTIL_SCHEMA_SPEC)}},
      {"roofline", {TORCHUTIL_ROOFLINE_FIELDS(TORCHUTIL_SCHEMA_SPEC)}},
      {"texts", {TORCHUTIL_RESULT_TEXTS(TORCHUTIL_SCHEMA_SPEC)}},
  };
#undef TORCHUTIL_SCHEMA_SPEC
  return all;
}

std::string commaJoined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    out += (out.empty() ? "" : ", ") + n;
  }
  return out;
}

}  // namespace

const char* valueKindName(ValueKind k) {
  switch (k) {
    case ValueKind::Real: return "real";
    case ValueKind::Count: return "count";
    case ValueKind::Text: return "text";
  }
  return "?";
}

const std::vector<FieldSpec>& schema(std::string_view table) {
  for (const NamedSchema& s : schemas()) {
    if (table == s.name) {
      return s.fields;
    }
  }
  throw std::invalid_argument("torchutil: no result table '" + std::string(table) +
                              "'; tables are " + commaJoined(schemaNames()));
}

std::vector<std::string> schemaNames() {
  std::vector<std::string> names;
  for (const NamedSchema& s : schemas()) {
    names.emplace_back(s.name);
  }
  return names;
}

std::vector<std::string> fieldNames(std::string_view table) {
  std::vector<std::string> names;
  for (const FieldSpec& f : schema(table)) {
    names.emplace_back(f.name);
  }
  return names;
}

std::vector<std::string> numericFieldNames(std::string_view table) {
  std::vector<std::string> names;
  for (const FieldSpec& f : schema(table)) {
    if (f.kind != ValueKind::Text) {
      names.emplace_back(f.name);
    }
  }
  return names;
}

ResultTable::ResultTable(std::string_view table)
    : table_(table), fields_(&schema(table)), numbers_(fields_->size()), texts_(fields_->size()) {}

size_t ResultTable::addRow() {
  for (size_t i = 0; i < fields_->size(); ++i) {
    if ((*fields_)[i].kind == ValueKind::Text) {
      texts_[i].emplace_back();
    } else {
      numbers_[i].push_back(std::numeric_limits<double>::quiet_NaN());
    }
  }
  return rows_++;
}

void ResultTable::setNumber(size_t row, size_t field, double value) {
  if (field >= fields_->size() || (*fields_)[field].kind == ValueKind::Text || row >= rows_) {
    throw std::out_of_range("torchutil: no numeric field " + std::to_string(field) + " in row " +
                            std::to_string(row) + " of table " + table_);
  }
  numbers_[field][row] = value;
}

void ResultTable::setString(size_t row, size_t field, std::string value) {
  if (field >= fields_->size() || (*fields_)[field].kind != ValueKind::Text || row >= rows_) {
    throw std::out_of_range("torchutil: no text field " + std::to_string(field) + " in row " +
                            std::to_string(row) + " of table " + table_);
  }
  texts_[field][row] = std::move(value);
}

size_t ResultTable::numericWidth() const {
  size_t n = 0;
  for (const FieldSpec& f : *fields_) {
    n += f.kind != ValueKind::Text ? 1 : 0;
  }
  return n;
}

std::vector<double> ResultTable::numbers() const {
  std::vector<double> out;
  out.reserve(rows_ * numericWidth());
  for (size_t r = 0; r < rows_; ++r) {
    for (size_t i = 0; i < fields_->size(); ++i) {
      if ((*fields_)[i].kind != ValueKind::Text) {
        out.push_back(numbers_[i][r]);
      }
    }
  }
  return out;
}

size_t ResultTable::index(std::string_view field, ValueKind want) const {
  for (size_t i = 0; i < fields_->size(); ++i) {
    if (field == (*fields_)[i].name) {
      const bool isText = (*fields_)[i].kind == ValueKind::Text;
      if (isText != (want == ValueKind::Text)) {
        throw std::invalid_argument("torchutil: field '" + std::string(field) + "' of table " +
                                    table_ + " is " + valueKindName((*fields_)[i].kind) + ", not " +
                                    (isText ? "numeric" : "text"));
      }
      return i;
    }
  }
  throw std::invalid_argument("torchutil: table " + table_ + " has no field '" +
                              std::string(field) + "'; fields are " +
                              commaJoined(fieldNames(table_)));
}

const std::vector<std::string>& ResultTable::textColumn(std::string_view field) const {
  return texts_[index(field, ValueKind::Text)];
}

const std::vector<double>& ResultTable::numberColumn(std::string_view field) const {
  return numbers_[index(field, ValueKind::Real)];
}

const ResultTable& NamedResult::table(std::string_view name) const {
  for (const ResultTable* t : {&ops, &kernels, &unknownOps}) {
    if (name == t->table()) {
      return *t;
    }
  }
  throw std::invalid_argument("torchutil: a profile has no table '" + std::string(name) +
                              "'; tables are ops, kernels, unknown_ops");
}

const std::string& NamedResult::text(std::string_view name) const {
  const std::vector<FieldSpec>& fields = schema("texts");
  for (size_t i = 0; i < fields.size(); ++i) {
    if (name == fields[i].name) {
      return texts[i];
    }
  }
  throw std::invalid_argument("torchutil: a profile has no text '" + std::string(name) +
                              "'; texts are " + commaJoined(fieldNames("texts")));
}

}  // namespace torchutil
