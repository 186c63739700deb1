#include "compiler/frontend/Parser.h"

#include <NnLexer.h>
#include <NnParser.h>
#include <antlr4-runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <regex>
#include <string_view>

namespace nnc {
namespace g = nnc_grammar;

namespace {

// ---------------------------------------------------------------------------
// Errors: ANTLR phrases messages as "mismatched input 'x' expecting {...}". We keep its
// analysis (what was expected, what was found) and rephrase it in our terms.
// ---------------------------------------------------------------------------
std::string friendlyTokenNames(std::string s) {
  static const std::pair<std::regex, const char *> rules[] = {
      {std::regex("\\bID\\b"), "a name"},
      {std::regex("\\bINT\\b"), "an integer"},
      {std::regex("\\bFLOAT\\b"), "a number"},
      {std::regex("\\bBAD_CHAR\\b"), "a character"},
      {std::regex("<EOF>"), "end of file"},
  };
  for (const auto &[re, name] : rules) s = std::regex_replace(s, re, name);
  return s;
}

std::string printableToken(const std::string &t) {
  std::string out;
  for (unsigned char c : t) {
    if (c >= 0x20 && c < 0x7f) out += char(c);
    else out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

// The UTF-8 character (2 to 4 bytes, well formed) starting at byte `at`, and its code
// point; nullopt when the bytes there are not one.
std::optional<std::pair<std::string, char32_t>> utf8Character(const std::string &src, size_t at) {
  const unsigned char lead = at < src.size() ? static_cast<unsigned char>(src[at]) : 0;
  const size_t n = lead >= 0xF0 && lead < 0xF5 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 && lead < 0xE0 ? 2 : 0;
  if (n == 0 || at + n > src.size() || lead >= 0xF5) return std::nullopt;
  char32_t cp = lead & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(src[at + i]);
    if ((c & 0xC0) != 0x80) return std::nullopt;
    cp = cp << 6 | (c & 0x3F);
  }
  const char32_t least = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000; // overlong forms are not UTF-8
  if (cp < least || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return std::nullopt;
  return std::pair{src.substr(at, n), cp};
}

struct TooManyErrors {};

// Where a program that ends too early went wrong: its last non-blank byte, and the
// innermost bracket still open there (comments skipped).
struct EndOfInput {
  SourceLoc last;
  std::optional<std::pair<SourceLoc, char>> unclosed;
};
// Scans text[0, limit) (all of it by default).
EndOfInput scanEndOfInput(const std::string &text, size_t limit = std::string::npos) {
  EndOfInput out;
  std::vector<std::pair<SourceLoc, char>> open;
  uint32_t line = 1, col = 0;
  bool comment = false;
  for (char c : std::string_view(text).substr(0, limit)) {
    ++col;
    if (c == '\n') { ++line; col = 0; comment = false; continue; }
    if (c != ' ' && c != '\t' && c != '\r') out.last = {line, col};
    if (comment) continue;
    if (c == '#') comment = true;
    else if (c == '(' || c == '{' || c == '[') open.push_back({{line, col}, c});
    else if ((c == ')' || c == '}' || c == ']') && !open.empty()) open.pop_back();
  }
  if (!open.empty()) out.unclosed = open.back();
  return out;
}

class DiagnosticErrorListener : public antlr4::BaseErrorListener {
public:
  explicit DiagnosticErrorListener(DiagnosticEngine &diags) : diags_(diags) {}

  void syntaxError(antlr4::Recognizer *recognizer, antlr4::Token *offending, size_t line,
                   size_t col, const std::string &msg, std::exception_ptr) override {
    // The first syntax error only: after it, what the parser makes of the rest is its
    // recovery's guess, and each guess added errors for the one mistake (`model =
    // dense(3)` gave four, the last one line below).
    if (reported_) return;
    reported_ = true;
    SourceRange r{{uint32_t(line), uint32_t(col + 1)}, {}};
    std::string found = "end of file";
    if (offending && offending->getType() != antlr4::Token::EOF) {
      // The stream holds one character per source byte, so token indices are byte
      // offsets: quote the bytes as written (getText() would re-encode them).
      size_t begin = offending->getStartIndex(), end = offending->getStopIndex() + 1;
      const std::string &src = diags_.file() ? diags_.file()->text() : std::string();
      std::string bytes = begin < end && end <= src.size() ? src.substr(begin, end - begin) : offending->getText();
      found = "'" + printableToken(bytes) + "'";
      r.end = {uint32_t(line), uint32_t(col + bytes.size())};
    }
    std::smatch m;
    std::string text;
    static const std::regex mismatched("^mismatched input .* expecting (.*)$");
    static const std::regex extraneous("^extraneous input .* expecting (.*)$");
    static const std::regex missing("^missing (.*) at .*$");
    if (std::regex_match(msg, m, mismatched))
      text = fmt::format("syntax error: expected {}, found {}", friendlyTokenNames(m[1]), found);
    else if (std::regex_match(msg, m, extraneous))
      text = fmt::format("syntax error: unexpected {}; expected {}", found, friendlyTokenNames(m[1]));
    else if (std::regex_match(msg, m, missing))
      text = fmt::format("syntax error: expected {} before {}", friendlyTokenNames(m[1]), found);
    else
      text = fmt::format("syntax error: unexpected {}", found);
    if (offending && offending->getType() == g::NnLexer::BAD_CHAR) {
      text = fmt::format("unexpected character {} (expected a name, number, operator or bracket)", found);
      // A non-ASCII letter (`fé = dense(3)`) is quoted whole, not as its first byte.
      if (const auto ch = diags_.file() ? utf8Character(diags_.file()->text(), offending->getStartIndex())
                                        : std::nullopt) {
        text = fmt::format("unexpected character '{}' (U+{:04X}): names are ASCII letters, digits and '_' (expected a "
                           "name, number, operator or bracket)",
                           ch->first, uint32_t(ch->second));
        r.end = {uint32_t(line), uint32_t(col + ch->first.size())};
      }
    }
    if (offending && offending->getText() == "shortcut")
      text = "syntax error: a shortcut goes right after the body of its residual (residual { ... } shortcut { ... })";
    // A keyword written as a layer's or a let's name (`model = dense(3)`, `f32 = ...`): a
    // token the grammar spells as a quoted word ('model', 'repeat', 'f32', ...). The
    // parser stops at the keyword, or, where the keyword starts a statement (`let`,
    // `input`, `repeat`, `residual`), at the '=' after it.
    const auto isKeyword = [&](const antlr4::Token *t) {
      const std::string literal = t ? std::string(recognizer->getVocabulary().getLiteralName(t->getType())) : "";
      return literal.size() > 2 && std::islower(static_cast<unsigned char>(literal[1])) &&
             std::all_of(literal.begin() + 1, literal.end() - 1, [](char c) {
               return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c));
             });
    };
    const antlr4::Token *named = nullptr; // the keyword before a '='
    if (offending && diags_.file()) {
      const std::string &src = diags_.file()->text();
      const auto singleEquals = [&](size_t at) {
        while (at < src.size() && (src[at] == ' ' || src[at] == '\t')) ++at;
        return at < src.size() && src[at] == '=' && (at + 1 >= src.size() || src[at + 1] != '=');
      };
      if (isKeyword(offending) && singleEquals(offending->getStopIndex() + 1)) named = offending;
      auto *parser = dynamic_cast<antlr4::Parser *>(recognizer);
      if (!named && parser && offending->getText() == "=" && offending->getTokenIndex() > 0) {
        const antlr4::Token *before = parser->getTokenStream()->get(offending->getTokenIndex() - 1);
        if (isKeyword(before)) named = before;
      }
    }
    if (named) {
      text = fmt::format("syntax error: '{}' is a keyword of the language; it cannot name a layer (rename it)",
                         named->getText());
      const size_t ncol = named->getCharPositionInLine();
      r = {{uint32_t(named->getLine()), uint32_t(ncol + 1)},
           {uint32_t(named->getLine()), uint32_t(ncol + named->getText().size())}};
    }
    const bool atEnd = !offending || offending->getType() == antlr4::Token::EOF;
    EndOfInput end;
    if (atEnd && diags_.file()) {
      end = scanEndOfInput(diags_.file()->text());
      if (end.last.valid()) r = {end.last, {}}; // point at the program's last character
    }
    diags_.error(r, text);
    if (atEnd && end.unclosed)
      diags_.note({end.unclosed->first, {}}, fmt::format("the '{}' opened here is never closed", end.unclosed->second));
    // A closing bracket expected before a token (clang's "to match this '('"): point at
    // the innermost '(' or '[' still open there when the parser wanted its closer.
    if (!atEnd && offending && diags_.file()) {
      EndOfInput before = scanEndOfInput(diags_.file()->text(), offending->getStartIndex());
      // Only '(' and '[': an open '{' is the body the statement is in, not a mistake.
      if (before.unclosed && before.unclosed->second != '{') {
        const char open = before.unclosed->second;
        const char close = open == '(' ? ')' : ']';
        const std::size_t expecting = msg.find("expecting");
        const bool wanted = (expecting != std::string::npos && msg.find(fmt::format("'{}'", close), expecting) != std::string::npos) ||
                            msg.rfind(fmt::format("missing '{}'", close), 0) == 0;
        if (wanted) diags_.note({before.unclosed->first, {}}, fmt::format("to match this '{}'", open));
      }
    }
    if (diags_.errorCount() >= DiagnosticEngine::kMaxErrors) throw TooManyErrors{};
  }

private:
  DiagnosticEngine &diags_;
  bool reported_ = false;
};

// ---------------------------------------------------------------------------
// Parse tree → AST
// ---------------------------------------------------------------------------
SourceRange rangeOf(antlr4::Token *t) {
  if (!t) return {};
  uint32_t line = uint32_t(t->getLine()), col = uint32_t(t->getCharPositionInLine() + 1);
  uint32_t len = uint32_t(t->getText().size());
  return {{line, col}, {line, col + (len ? len - 1 : 0)}};
}
SourceRange rangeOf(antlr4::ParserRuleContext *ctx) {
  SourceRange r = rangeOf(ctx->getStart());
  antlr4::Token *stop = ctx->getStop();
  if (stop && stop->getLine() == ctx->getStart()->getLine() &&
      stop->getTokenIndex() >= ctx->getStart()->getTokenIndex())
    r.end = rangeOf(stop).end;
  return r;
}
SourceRange rangeOf(antlr4::tree::TerminalNode *n) { return n ? rangeOf(n->getSymbol()) : SourceRange{}; }

// Deepest expression tree the AST builder accepts (`1+1+...+1` nests once per operator).
constexpr int kMaxExprDepth = 1000;

class AstBuilder {
public:
  explicit AstBuilder(DiagnosticEngine &diags) : diags_(diags) {}

  ast::Program build(g::NnParser::FileContext *file) {
    ast::Program prog;
    for (auto *item : file->topItem()) {
      if (auto *let = item->letStmt()) prog.lets.push_back(letStmt(let));
      else if (auto *b = item->blockDecl())
        prog.blocks.push_back(callable(b->ID(), b->paramList(), b->body()));
      else if (auto *m = item->modelDecl())
        prog.models.push_back(callable(m->ID(), m->paramList(), m->body()));
    }
    return prog;
  }

private:
  /// callable ::= ('block' | 'model') ID '(' paramList? ')' '{' body '}'
  ast::Callable callable(antlr4::tree::TerminalNode *id, g::NnParser::ParamListContext *params,
                         g::NnParser::BodyContext *b) {
    ast::Callable c;
    c.name = id->getText();
    c.range = rangeOf(id);
    if (params)
      for (auto *p : params->param()) {
        ast::Param param;
        param.name = p->ID()->getText();
        param.range = rangeOf(p->ID());
        if (p->expr()) param.defaultValue = expr(p->expr());
        c.params.push_back(std::move(param));
      }
    c.body = body(b);
    return c;
  }

  /// body ::= stmt*
  ast::Body body(g::NnParser::BodyContext *b) {
    ast::Body out;
    if (!b) return out;
    for (auto *s : b->stmt()) {
      if (auto *let = s->letStmt()) out.push_back(letStmt(let));
      else if (auto *in = s->inputStmt()) out.push_back(inputStmt(in));
      else if (auto *rep = s->repeatStmt()) out.push_back(repeatStmt(rep));
      else if (auto *res = s->residualStmt()) out.push_back(residualStmt(res));
      else if (auto *layer = s->layerStmt()) out.push_back(layerStmt(layer));
    }
    return out;
  }

  /// letStmt ::= 'let' ID '=' expr
  ast::Stmt letStmt(g::NnParser::LetStmtContext *ctx) {
    ast::Stmt s;
    s.kind = ast::Stmt::Kind::Let;
    s.range = rangeOf(ctx->getStart());
    s.name = ctx->ID()->getText();
    s.nameRange = rangeOf(ctx->ID());
    s.value = expr(ctx->expr());
    return s;
  }

  /// inputStmt ::= 'input' ID ':' dtype? '[' expr (',' expr)* ']'
  ast::Stmt inputStmt(g::NnParser::InputStmtContext *ctx) {
    ast::Stmt s;
    s.kind = ast::Stmt::Kind::Input;
    s.range = rangeOf(ctx->getStart());
    s.name = ctx->ID()->getText();
    s.nameRange = rangeOf(ctx->ID());
    if (ctx->dtype()) s.dtype = parseDType(ctx->dtype()->getText());
    for (auto *e : ctx->expr()) s.dims.push_back(expr(e));
    return s;
  }

  /// repeatStmt ::= 'repeat' expr ('as' ID)? '{' body '}'
  ast::Stmt repeatStmt(g::NnParser::RepeatStmtContext *ctx) {
    ast::Stmt s;
    s.kind = ast::Stmt::Kind::Repeat;
    s.range = rangeOf(ctx->getStart());
    s.value = expr(ctx->expr());
    s.name = ctx->ID() ? ctx->ID()->getText() : ""; // empty: the default name, `layers`
    s.nameRange = ctx->ID() ? rangeOf(ctx->ID()) : s.range;
    s.body = body(ctx->body());
    return s;
  }

  /// residualStmt ::= 'residual' '{' body '}' ('shortcut' '{' body '}')?
  ast::Stmt residualStmt(g::NnParser::ResidualStmtContext *ctx) {
    ast::Stmt s;
    s.kind = ast::Stmt::Kind::Residual;
    s.range = rangeOf(ctx->getStart());
    auto bodies = ctx->body();
    if (!bodies.empty()) s.body = body(bodies[0]);
    if (bodies.size() > 1) s.shortcut = body(bodies[1]);
    return s;
  }

  /// layerStmt ::= (ID '=')? ID ('(' argList? ')')?
  ast::Stmt layerStmt(g::NnParser::LayerStmtContext *ctx) {
    ast::Stmt s;
    s.kind = ast::Stmt::Kind::Layer;
    auto ids = ctx->ID();
    antlr4::tree::TerminalNode *callee = ids.back();
    if (ids.size() == 2) {
      s.name = ids[0]->getText();
      s.nameRange = rangeOf(ids[0]);
    }
    s.callee = callee->getText();
    s.calleeRange = rangeOf(callee);
    s.range = s.name.empty() ? s.calleeRange : s.nameRange;
    if (auto *args = ctx->argList()) {
      std::string firstNamed;
      bool reported = false;
      for (auto *a : args->arg()) {
        s.args.push_back(arg(a));
        const ast::Arg &last = s.args.back();
        if (!last.name.empty()) {
          if (firstNamed.empty()) firstNamed = last.name;
        } else if (!firstNamed.empty() && !reported) { // LANGUAGE.md §3: positional, then named
          diags_.error(last.value.range,
                       fmt::format("positional argument after the named argument '{}': arguments are positional "
                                   "first, then NAME=VALUE",
                                   firstNamed));
          reported = true;
        }
      }
    }
    return s;
  }

  /// arg ::= (ID '=')? argValue
  ast::Arg arg(g::NnParser::ArgContext *ctx) {
    ast::Arg a;
    if (ctx->ID()) {
      a.name = ctx->ID()->getText();
      a.nameRange = rangeOf(ctx->ID());
    }
    auto *v = ctx->argValue();
    a.value.range = rangeOf(v);
    if (!a.name.empty()) a.value.range.begin = a.nameRange.begin;
    if (auto *d = dynamic_cast<g::NnParser::DtypeValueContext *>(v)) {
      a.value.kind = ast::ArgValue::Kind::DType;
      a.value.dtype = parseDType(d->dtype()->getText()).value_or(DType::F32);
    } else if (auto *p = dynamic_cast<g::NnParser::PairValueContext *>(v)) {
      a.value.kind = ast::ArgValue::Kind::Pair;
      a.value.first = expr(p->expr(0));
      a.value.second = expr(p->expr(1));
    } else if (auto *e = dynamic_cast<g::NnParser::ExprValueContext *>(v)) {
      a.value.first = expr(e->expr());
    }
    return a;
  }

  /// expr ::= ('-'|'+') expr | expr ('*'|'/') expr | expr ('+'|'-') expr
  ///        | '(' expr ')' | INT | FLOAT | ID
  std::unique_ptr<ast::Expr> expr(g::NnParser::ExprContext *ctx) {
    auto e = std::make_unique<ast::Expr>();
    if (!ctx) return e; // only after a syntax error, which is already reported
    e->range = rangeOf(ctx);
    if (depth_ >= kMaxExprDepth) {
      if (!tooDeep_)
        diags_.error(e->range, fmt::format("expression too long: expected at most {} nested operations, "
                                           "found more", kMaxExprDepth));
      tooDeep_ = true;
      return e;
    }
    ++depth_;
    struct Leave { int &d; ~Leave() { --d; } } leave{depth_};
    if (auto *u = dynamic_cast<g::NnParser::UnaryExprContext *>(ctx)) {
      if (u->op->getText() == "+") return expr(u->expr());
      e->kind = ast::Expr::Kind::Negate;
      e->lhs = expr(u->expr());
    } else if (auto *m = dynamic_cast<g::NnParser::MulExprContext *>(ctx)) {
      binary(*e, m->op, m->expr(0), m->expr(1));
    } else if (auto *a = dynamic_cast<g::NnParser::AddExprContext *>(ctx)) {
      binary(*e, a->op, a->expr(0), a->expr(1));
    } else if (auto *p = dynamic_cast<g::NnParser::ParenExprContext *>(ctx)) {
      return expr(p->expr());
    } else if (auto *i = dynamic_cast<g::NnParser::IntExprContext *>(ctx)) {
      e->kind = ast::Expr::Kind::Int;
      std::string digits;
      for (char c : i->INT()->getText())
        if (c != '_') digits += c;
      uint64_t v = 0;
      for (char c : digits) {
        if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, uint64_t(c - '0'), &v) ||
            v > uint64_t(INT64_MAX)) {
          e->intTooLarge = true;
          break;
        }
      }
      e->intValue = int64_t(v);
    } else if (auto *f = dynamic_cast<g::NnParser::FloatExprContext *>(ctx)) {
      e->kind = ast::Expr::Kind::Float;
      std::string text;
      for (char c : f->FLOAT()->getText())
        if (c != '_') text += c;
      e->floatValue = std::strtod(text.c_str(), nullptr);
    } else if (auto *n = dynamic_cast<g::NnParser::NameExprContext *>(ctx)) {
      e->kind = ast::Expr::Kind::Name;
      e->name = n->ID()->getText();
    }
    return e;
  }

  void binary(ast::Expr &e, antlr4::Token *op, g::NnParser::ExprContext *l,
              g::NnParser::ExprContext *r) {
    e.kind = ast::Expr::Kind::Binary;
    e.op = op->getText()[0];
    e.lhs = expr(l);
    e.rhs = expr(r);
  }

  DiagnosticEngine &diags_;
  int depth_ = 0;
  bool tooDeep_ = false;
};

// Rejects nesting deeper than kMaxNesting before ANTLR's recursive descent sees it. A
// run of signs (`- - - 1`) nests too, so runs longer than kMaxOperatorRun are rejected.
constexpr int kMaxOperatorRun = 8;
bool checkNesting(const SourceFile &file, DiagnosticEngine &diags) {
  int depth = 0, run = 0;
  uint32_t line = 1, col = 0;
  bool comment = false;
  for (char c : file.text()) {
    ++col;
    if (c == '\n') { ++line; col = 0; comment = false; continue; }
    if (comment) continue;
    if (c == '+' || c == '-' || c == '*' || c == '/') {
      if (++run > kMaxOperatorRun) {
        diags.error({{line, col}, {}},
                    fmt::format("too many operators in a row: expected at most {}, found more", kMaxOperatorRun));
        return false;
      }
      continue;
    }
    if (c != ' ' && c != '\t' && c != '\r' && c != '#') run = 0;
    if (c == '#') comment = true;
    else if (c == '(' || c == '{' || c == '[') {
      if (++depth > kMaxNesting) {
        diags.error({{line, col}, {}},
                    fmt::format("brackets nested too deeply: expected at most {} levels, found more", kMaxNesting));
        return false;
      }
    } else if (c == ')' || c == '}' || c == ']') {
      depth = std::max(0, depth - 1);
    }
  }
  return true;
}

// ANTLR's input stream rejects malformed UTF-8 with an exception, and counts columns in
// code points. A .nn file may hold any bytes in comments, and our columns are bytes, so
// the lexer reads one character per byte (0x80-0xff become U+0080-U+00FF): inside a
// comment they are ignored, elsewhere each is an "unexpected character" quoted as written.
class ByteInputStream : public antlr4::ANTLRInputStream {
public:
  explicit ByteInputStream(const std::string &bytes) {
    _data.reserve(bytes.size());
    for (unsigned char c : bytes) _data.push_back(char32_t(c));
  }
};

} // namespace

std::optional<ast::Program> parseProgram(const SourceFile &file, DiagnosticEngine &diags) {
  if (!checkNesting(file, diags)) return std::nullopt;
  ByteInputStream input(file.text());
  g::NnLexer lexer(&input);
  DiagnosticErrorListener listener(diags);
  lexer.removeErrorListeners();
  lexer.addErrorListener(&listener);
  antlr4::CommonTokenStream tokens(&lexer);
  g::NnParser parser(&tokens);
  parser.removeErrorListeners();
  parser.addErrorListener(&listener);
  size_t before = diags.errorCount();
  g::NnParser::FileContext *tree = nullptr;
  try {
    tree = parser.file();
  } catch (const TooManyErrors &) {
    return std::nullopt; // garbage input: what was reported is enough
  } catch (const std::exception &e) {
    diags.error({}, fmt::format("could not read the program: {}", e.what()));
    return std::nullopt;
  }
  if (diags.errorCount() != before) return std::nullopt;
  ast::Program prog = AstBuilder(diags).build(tree);
  if (diags.errorCount() != before) return std::nullopt;
  return prog;
}

} // namespace nnc
