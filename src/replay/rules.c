/* Hint strategies as rules: a classifier from a request's attributes to a
 * hint, restricted to what one granularity of hint can see.
 *
 * A rule is a conjunction of conditions and a hint.  Conditions read one
 * field each; every field belongs to the granularities that can see it:
 *
 *   field         type     process  file  io
 *   comm          string      ✓            ✓
 *   pid           number      ✓            ✓
 *   ioprio_class  string      ✓            ✓     none, rt, be, idle
 *   ioprio_level  number      ✓            ✓
 *   ioprio_hint   number      ✓            ✓
 *   rfc2014       string      ✓            ✓     the 2014 RFC's advice in the ioprio
 *   label         string             ✓     ✓
 *   object        string             ✓     ✓
 *   op            string                   ✓     R, W, D
 *   length        number                   ✓     bytes
 *   offset        number                   ✓     bytes
 *   meta, sync, fua, readahead, preflush   ✓     rwbs flags (alone: true)
 *
 * Evaluation: class and advice each come from the first matching rule that
 * gives one (flags are the union), so "what kind of data" and "what to do"
 * can come from different rules — the same independence as the layers of
 * hc_hint_resolve.  Regular expressions are POSIX extended; their results
 * are memoised per interned string, so a trace with a few hundred distinct
 * comms costs a few hundred regexec calls, not millions.
 */
#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hintcache/codec.h"
#include "hintcache/replay.h"
#include "util.h"

enum field {
  F_COMM, F_PID, F_IOPRIO_CLASS, F_IOPRIO_LEVEL, F_IOPRIO_HINT, F_RFC2014, F_LABEL, F_OBJECT,
  F_OP, F_LENGTH, F_OFFSET, F_META, F_SYNC, F_FUA, F_READAHEAD, F_PREFLUSH,
};

#define SEE_P (1u << HC_STRATEGY_PROCESS)
#define SEE_F (1u << HC_STRATEGY_FILE)
#define SEE_I (1u << HC_STRATEGY_IO)

enum ftype { T_STR, T_NUM, T_FLAG };

static const struct field_desc {
  const char *name;
  enum ftype type;
  unsigned seen_by;
} fields[] = {
  [F_COMM] = { "comm", T_STR, SEE_P | SEE_I },
  [F_PID] = { "pid", T_NUM, SEE_P | SEE_I },
  [F_IOPRIO_CLASS] = { "ioprio_class", T_STR, SEE_P | SEE_I },
  [F_IOPRIO_LEVEL] = { "ioprio_level", T_NUM, SEE_P | SEE_I },
  [F_IOPRIO_HINT] = { "ioprio_hint", T_NUM, SEE_P | SEE_I },
  [F_RFC2014] = { "rfc2014", T_STR, SEE_P | SEE_I },
  [F_LABEL] = { "label", T_STR, SEE_F | SEE_I },
  [F_OBJECT] = { "object", T_STR, SEE_F | SEE_I },
  [F_OP] = { "op", T_STR, SEE_I },
  [F_LENGTH] = { "length", T_NUM, SEE_I },
  [F_OFFSET] = { "offset", T_NUM, SEE_I },
  [F_META] = { "meta", T_FLAG, SEE_I },
  [F_SYNC] = { "sync", T_FLAG, SEE_I },
  [F_FUA] = { "fua", T_FLAG, SEE_I },
  [F_READAHEAD] = { "readahead", T_FLAG, SEE_I },
  [F_PREFLUSH] = { "preflush", T_FLAG, SEE_I },
};
#define NFIELDS (sizeof fields / sizeof fields[0])

enum cmp { C_EQ, C_NE, C_RE, C_NRE, C_LT, C_GT, C_LE, C_GE, C_TRUE };

struct cond {
  enum field field;
  enum cmp cmp;
  char *text;          /* for C_EQ/C_NE on strings */
  uint64_t num;
  regex_t re;
  bool has_re;
  struct hc_u64set memo_true, memo_false; /* string ids already matched */
};

struct rule {
  struct cond *cond;
  unsigned ncond;
  struct hc_hint hint;
  unsigned line;
};

struct hc_rules {
  enum hc_strategy strategy;
  char *text; /* the source, for hc_rules_copy */
  struct rule *rule;
  unsigned nrule;
};

static const char *const strategy_names[HC_STRATEGY_COUNT] = {
  "none", "process", "file", "io", "oracle",
};

HC_DEFINE_NAMES (hc_strategy, enum hc_strategy, strategy_names, HC_STRATEGY_COUNT)

/* The defaults: what each granularity can say about the development
 * traces' world (ext4, a database, backups at idle priority).  A label or
 * a priority says what the data is, a class; only a source that states
 * advice (the RFC's ioprio bits) gives advice.  The cache weighs a class's
 * built-in attributes by evidence but obeys advice, so a guess made here
 * must not pose as advice. */
static const char default_process[] =
  "# What a per-process interface sees: the task and its I/O priority.\n"
  "ioprio_class=idle -> background\n"
  "rfc2014=dontneed -> dontneed\n"
  "rfc2014=evict -> evict\n"
  "rfc2014=willneed -> willneed\n"
  "comm~^jbd2 -> journal\n";

static const char default_file[] =
  "# What a filesystem or per-file fadvise knows: the data's label and owner.\n"
  "label=fs_metadata -> metadata\n"
  "label=catalog -> metadata\n"
  "label=index -> metadata\n"
  "label=journal -> journal\n"
  "label=wal -> journal\n"
  "label=temp -> background\n"
  "object~^/backup/ -> background\n"
  "label=table -> data\n"
  "label=toast -> data\n"
  "label=other_file -> data\n";

static const char default_io[] =
  "# Everything: the data's label, the request's flags and its priority.\n"
  "label=fs_metadata -> metadata\n"
  "label=catalog -> metadata\n"
  "label=index -> metadata\n"
  "meta -> metadata\n"
  "label=journal -> journal\n"
  "label=wal -> journal\n"
  "comm~^jbd2 -> journal\n"
  "label=temp -> background\n"
  "object~^/backup/ -> background\n"
  "ioprio_class=idle -> background\n"
  "rfc2014=dontneed -> dontneed\n"
  "rfc2014=willneed -> willneed\n"
  "label=table -> data\n"
  "label=toast -> data\n"
  "label=other_file -> data\n";

const char *
hc_rules_default_text (enum hc_strategy s)
{
  switch (s) {
  case HC_STRATEGY_PROCESS: return default_process;
  case HC_STRATEGY_FILE: return default_file;
  case HC_STRATEGY_IO: return default_io;
  default: return "";
  }
}

static void
free_cond (struct cond *c)
{
  free (c->text);
  if (c->has_re)
    regfree (&c->re);
  hc_u64set_free (&c->memo_true);
  hc_u64set_free (&c->memo_false);
}

void
hc_rules_free (hc_rules *r)
{
  if (!r)
    return;
  for (unsigned i = 0; i < r->nrule; i++) {
    for (unsigned k = 0; k < r->rule[i].ncond; k++)
      free_cond (&r->rule[i].cond[k]);
    free (r->rule[i].cond);
  }
  free (r->rule);
  free (r->text);
  free (r);
}

int
hc_rules_copy (const hc_rules *r, hc_rules **out)
{
  return hc_rules_new (r->strategy, r->text, out, NULL);
}

static char *
trim (char *s)
{
  while (*s == ' ' || *s == '\t')
    s++;
  char *e = s + strlen (s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
    *--e = '\0';
  return s;
}

/* What compiling a rule's regular expression may cost, and the deepest
 * nesting of groups counted.  glibc's regcomp copies a repeated
 * subexpression once per repetition ("x+" becomes "xx*", "x{2,4}" "xxx?x?"),
 * so nested repetitions multiply: "((a+)+)+…" doubles with every level,
 * and twenty levels take gigabytes and seconds to compile.  Repeating what
 * can match nothing ("()+", "(a*)*") costs more again: its copies are
 * chains of empty transitions, whose closures regcomp computes in more than
 * linear time.  A rule line of plain text (under 1 KiB) always fits. */
#define REGEX_MAX_COST 2048
#define REGEX_NULL_FACTOR 4
#define REGEX_MAX_DEPTH 64

static uint64_t
sat_add (uint64_t a, uint64_t b)
{
  return a > UINT64_MAX / 4 - b ? UINT64_MAX / 4 : a + b;
}

static uint64_t
sat_mul (uint64_t a, uint64_t b)
{
  return b && a > UINT64_MAX / 4 / b ? UINT64_MAX / 4 : a * b;
}

/* One level of groups while estimating: the cost of the finished items
 * (of every alternative so far) and of the last one, which a repetition
 * applies to, and which of them can match the empty string. */
struct re_level {
  uint64_t sum, last;
  bool alt_null;  /* a finished alternative can match nothing */
  bool seq_null;  /* so can every item before the last, in this alternative */
  bool last_null; /* so can the last (true while there is none) */
};

/* Ends the last item of a level: it joins the sum. */
static void
re_push_item (struct re_level *l, uint64_t cost, bool null)
{
  l->sum = sat_add (l->sum, l->last);
  l->seq_null = l->seq_null && l->last_null;
  l->last = cost;
  l->last_null = null;
}

/* An estimate of the cost of compiling an extended regular expression: a
 * node per atom (a character, an escape, a bracket expression, an anchor),
 * group and repetition, each repetition multiplying what it repeats by its
 * copies ('*' and '?' one, '+' two, "{m,n}" n, "{m,}" m + 1), and by
 * REGEX_NULL_FACTOR when that can match nothing.  Only the size is judged;
 * regcomp still judges the syntax. */
static uint64_t
regex_cost (const char *re)
{
  struct re_level lv[REGEX_MAX_DEPTH + 1];
  unsigned depth = 0;

  lv[0] = (struct re_level) { .seq_null = true, .last_null = true };
  for (const char *p = re; *p; p++) {
    struct re_level *l = &lv[depth];
    uint64_t copies = 0;
    bool may_skip = false; /* the repetition allows zero copies */
    switch (*p) {
    case '(':
      if (++depth > REGEX_MAX_DEPTH)
        return UINT64_MAX;
      lv[depth] = (struct re_level) { .seq_null = true, .last_null = true };
      continue;
    case ')':
      if (depth == 0)
        break; /* an atom, or regcomp's error */
      depth--;
      re_push_item (&lv[depth], sat_add (sat_add (l->sum, l->last), 1),
                    l->alt_null || (l->seq_null && l->last_null));
      continue;
    case '|':
      l->alt_null = l->alt_null || (l->seq_null && l->last_null);
      l->sum = sat_add (l->sum, l->last);
      l->last = 0;
      l->seq_null = l->last_null = true;
      continue;
    case '^': case '$':
      re_push_item (l, 1, true);
      continue;
    case '*': case '?': copies = 1, may_skip = true; break;
    case '+': copies = 2; break;
    case '{': {
      char *end;
      if (!isdigit ((unsigned char) p[1]))
        break; /* not an interval */
      unsigned long m = strtoul (p + 1, &end, 10), n = m;
      if (*end == ',' && end[1] == '}')
        n = m + 1, end++;
      else if (*end == ',' && isdigit ((unsigned char) end[1]))
        n = strtoul (end + 1, &end, 10);
      if (*end != '}')
        break;
      copies = n > m ? n : m;
      if (copies == 0)
        copies = 1;
      may_skip = m == 0;
      p = end;
      break;
    }
    case '\\':
      if (p[1])
        p++;
      break;
    case '[': {
      /* To the closing ']': one first (or after '^') is literal, and
       * "[:class:]", "[.x.]" and "[=x=]" may hold one too.  Without one,
       * the '[' alone is counted and the rest still is: regcomp builds
       * what comes before it meets the error. */
      const char *q = p + 1;
      if (*q == '^')
        q++;
      if (*q == ']')
        q++;
      while (q && *q && *q != ']') {
        if (*q == '[' && (q[1] == ':' || q[1] == '.' || q[1] == '=')) {
          const char *close = strchr (q + 2, q[1]);
          while (close && close[1] != ']')
            close = strchr (close + 1, q[1]);
          q = close ? close + 1 : NULL;
        }
        if (q)
          q++;
      }
      if (q && *q)
        p = q;
      break;
    }
    default:
      break;
    }
    if (copies && l->last) {
      /* A repetition of what came last. */
      uint64_t each = l->last_null ? sat_mul (l->last, REGEX_NULL_FACTOR) : l->last;
      l->last = sat_add (sat_mul (each, copies), 1);
      l->last_null = l->last_null || may_skip;
      continue;
    }
    re_push_item (l, 1, false); /* an atom (a repetition of nothing is one for regcomp) */
  }
  while (depth > 0) {
    struct re_level *l = &lv[depth--];
    re_push_item (&lv[depth], sat_add (l->sum, l->last), false);
  }
  return sat_add (lv[0].sum, lv[0].last);
}

/* Parses "FIELD OP VALUE" or a flag name into *c. */
static int
parse_cond (enum hc_strategy s, char *text, struct cond *c, struct hc_parse_error *err)
{
  static const struct { const char *op; enum cmp cmp; } ops[] = {
    { "!~", C_NRE }, { "!=", C_NE }, { "<=", C_LE }, { ">=", C_GE },
    { "~", C_RE }, { "=", C_EQ }, { "<", C_LT }, { ">", C_GT },
  };
  size_t n = strcspn (text, "!~=<>");
  char name[32], *value = NULL;
  unsigned f;

  memset (c, 0, sizeof *c);
  if (n >= sizeof name) {
    hc_parse_fail (err, "'%s' is not a condition", text);
    return -EINVAL;
  }
  memcpy (name, text, n);
  name[n] = '\0';
  char *nm = trim (name);
  for (f = 0; f < NFIELDS; f++)
    if (strcmp (nm, fields[f].name) == 0)
      break;
  if (f == NFIELDS) {
    hc_parse_fail (err, "unknown field '%s'", nm);
    return -EINVAL;
  }
  c->field = (enum field) f;
  if (!(fields[f].seen_by & (1u << s))) {
    hc_parse_fail (err, "the %s strategy cannot see field '%s'", hc_strategy_name (s), nm);
    return -EINVAL;
  }
  if (text[n] == '\0') {
    if (fields[f].type != T_FLAG) {
      hc_parse_fail (err, "field '%s' needs an operator and a value", nm);
      return -EINVAL;
    }
    c->cmp = C_TRUE;
    return 0;
  }
  for (unsigned i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (strncmp (text + n, ops[i].op, strlen (ops[i].op)) == 0) {
      c->cmp = ops[i].cmp;
      value = trim (text + n + strlen (ops[i].op));
      break;
    }
  if (!value || !*value) {
    hc_parse_fail (err, "'%s': missing value", text);
    return -EINVAL;
  }
  switch (fields[f].type) {
  case T_FLAG:
    hc_parse_fail (err, "flag '%s' takes no operator", nm);
    return -EINVAL;
  case T_NUM: {
    unsigned long long v;
    if (c->cmp == C_RE || c->cmp == C_NRE || hc_parse_number (value, &v) < 0) {
      hc_parse_fail (err, "'%s': field '%s' compares with a number", text, nm);
      return -EINVAL;
    }
    c->num = v;
    return 0;
  }
  case T_STR:
  default:
    if (c->cmp == C_LT || c->cmp == C_GT || c->cmp == C_LE || c->cmp == C_GE) {
      hc_parse_fail (err, "'%s': field '%s' is a string", text, nm);
      return -EINVAL;
    }
    if (c->cmp == C_RE || c->cmp == C_NRE) {
      if (regex_cost (value) > REGEX_MAX_COST) {
        hc_parse_fail (err, "regular expression '%.64s' is too large once its repetitions are "
                       "expanded", value);
        return -EINVAL;
      }
      int rc = regcomp (&c->re, value, REG_EXTENDED | REG_NOSUB);
      if (rc) {
        char msg[96];
        regerror (rc, &c->re, msg, sizeof msg);
        hc_parse_fail (err, "bad regular expression '%s': %s", value, msg);
        return -EINVAL;
      }
      c->has_re = true;
    } else if (!(c->text = strdup (value))) {
      return -ENOMEM;
    }
    return 0;
  }
}

/* Parses a rule's right-hand side: a hint text, or class=C and advice=A. */
static int
parse_hint (char *text, struct hc_hint *h, struct hc_parse_error *err)
{
  char buf[128];
  size_t o = 0;

  /* class=X advice=Y → "X Y" for hc_hint_parse. */
  for (char *tok = strtok (text, " \t"); tok; tok = strtok (NULL, " \t")) {
    char *v = tok;
    if (strncmp (tok, "class=", 6) == 0 || strncmp (tok, "advice=", 7) == 0)
      v = strchr (tok, '=') + 1;
    int k = snprintf (buf + o, sizeof buf - o, "%s%s", o ? " " : "", v);
    if (k < 0 || (size_t) k >= sizeof buf - o) {
      hc_parse_fail (err, "hint too long");
      return -EINVAL;
    }
    o += (size_t) k;
  }
  buf[o] = '\0';
  if (!o || hc_hint_parse (buf, h) < 0) {
    hc_parse_fail (err, "'%s' is not a hint (a class and/or an advice, e.g. journal, "
                        "background+dontneed)", buf);
    return -EINVAL;
  }
  return 0;
}

int
hc_rules_new (enum hc_strategy s, const char *text, hc_rules **out, struct hc_parse_error *err)
{
  hc_rules *r;
  char line[1024];
  unsigned lineno = 0;
  int rc = 0;

  if ((unsigned) s >= HC_STRATEGY_COUNT)
    return -EINVAL;
  if (!text)
    text = hc_rules_default_text (s);
  if (!(r = calloc (1, sizeof *r)))
    return -ENOMEM;
  r->strategy = s;
  if (!(r->text = strdup (text))) {
    free (r);
    return -ENOMEM;
  }
  for (const char *p = text; *p && rc == 0;) {
    size_t n = strcspn (p, "\n");
    lineno++;
    if (err)
      err->line = lineno;
    if (n >= sizeof line) {
      hc_parse_fail (err, "line longer than %zu bytes", sizeof line - 1);
      rc = -EINVAL;
      break;
    }
    memcpy (line, p, n);
    line[n] = '\0';
    p += n + (p[n] == '\n');
    char *hash = strchr (line, '#');
    if (hash)
      *hash = '\0';
    char *l = trim (line);
    if (!*l)
      continue;
    if (s == HC_STRATEGY_NONE || s == HC_STRATEGY_ORACLE) {
      hc_parse_fail (err, "the %s strategy takes no rules", hc_strategy_name (s));
      rc = -EINVAL;
      break;
    }
    char *arrow = strstr (l, "->");
    if (!arrow) {
      hc_parse_fail (err, "expected 'CONDITION -> HINT'");
      rc = -EINVAL;
      break;
    }
    *arrow = '\0';
    struct rule ru = { .line = lineno };
    if ((rc = parse_hint (trim (arrow + 2), &ru.hint, err)) < 0)
      break;
    for (char *c = l; c && rc == 0;) {
      char *amp = strstr (c, "&&");
      if (amp)
        *amp = '\0';
      char *ct = trim (c);
      struct cond *nc = realloc (ru.cond, (ru.ncond + 1) * sizeof *nc);
      if (!nc) {
        rc = -ENOMEM;
        break;
      }
      ru.cond = nc;
      if (!*ct) {
        hc_parse_fail (err, "empty condition");
        rc = -EINVAL;
        break;
      }
      if ((rc = parse_cond (s, ct, &ru.cond[ru.ncond], err)) < 0)
        break;
      ru.ncond++;
      c = amp ? amp + 2 : NULL;
    }
    struct rule *nr = rc == 0 ? realloc (r->rule, (r->nrule + 1) * sizeof *nr) : NULL;
    if (!nr) {
      for (unsigned k = 0; k < ru.ncond; k++)
        free_cond (&ru.cond[k]);
      free (ru.cond);
      if (rc == 0)
        rc = -ENOMEM;
      break;
    }
    r->rule = nr;
    r->rule[r->nrule++] = ru;
  }
  if (rc < 0) {
    hc_rules_free (r);
    return rc;
  }
  *out = r;
  return 0;
}

static const char *const ioprio_classes[] = { "none", "rt", "be", "idle" };

/* The 2014 RFC's advice carried in a request's ioprio, by name. */
static const char *
rfc_advice (const struct hc_trace_req *q)
{
  struct hc_wire w = { .n = 1, .v = { (uint64_t) q->ioprio_class << 13 | (uint64_t) q->ioprio_hint << 3
                                      | q->ioprio_level } };
  struct hc_hint h;
  if (hc_codec_decode (hc_codec_get (HC_CODEC_RFC2014), NULL, &w, HC_DIR_ANY, &h, NULL, 0) < 0)
    return "reserved";
  return hc_advice_name (h.advice);
}

/* Does condition c hold for request q? */
static bool
holds (struct cond *c, const struct hc_trace_req *q, const hc_trace *t)
{
  const char *s = NULL;
  uint32_t id = 0;
  uint64_t num = 0;

  switch (c->field) {
  case F_COMM: id = q->comm; s = hc_trace_string (t, id); break;
  case F_OBJECT: id = q->object; s = hc_trace_string (t, id); break;
  case F_LABEL: s = hc_trace_label_name (q->label); break;
  case F_IOPRIO_CLASS: s = q->ioprio_class < 4 ? ioprio_classes[q->ioprio_class] : ""; break;
  case F_RFC2014: s = rfc_advice (q); break;
  case F_OP: s = hc_trace_op_name (q->op); break;
  case F_PID: num = q->pid; break;
  case F_IOPRIO_LEVEL: num = q->ioprio_level; break;
  case F_IOPRIO_HINT: num = q->ioprio_hint; break;
  case F_LENGTH: num = q->length; break;
  case F_OFFSET: num = q->offset; break;
  case F_META: return q->rwbs & HC_RWBS_META;
  case F_SYNC: return q->rwbs & HC_RWBS_SYNC;
  case F_FUA: return q->rwbs & HC_RWBS_FUA;
  case F_READAHEAD: return q->rwbs & HC_RWBS_READAHEAD;
  case F_PREFLUSH: return q->rwbs & HC_RWBS_PREFLUSH;
  }
  switch (c->cmp) {
  case C_EQ: return s ? strcmp (s, c->text) == 0 : num == c->num;
  case C_NE: return s ? strcmp (s, c->text) != 0 : num != c->num;
  case C_LT: return num < c->num;
  case C_GT: return num > c->num;
  case C_LE: return num <= c->num;
  case C_GE: return num >= c->num;
  case C_RE:
  case C_NRE: {
    bool m;
    /* Interned strings (comm, object) are memoised by id; the few fixed
     * names (labels, classes) are short and cheap to match anyway. */
    if (id && hc_u64set_has (&c->memo_true, id))
      m = true;
    else if (id && hc_u64set_has (&c->memo_false, id))
      m = false;
    else {
      m = regexec (&c->re, s ? s : "", 0, NULL, 0) == 0;
      if (id)
        hc_u64set_add (m ? &c->memo_true : &c->memo_false, id);
    }
    return c->cmp == C_RE ? m : !m;
  }
  case C_TRUE:
  default:
    return false;
  }
}

struct hc_hint
hc_rules_classify (hc_rules *r, const struct hc_trace_req *q, const hc_trace *t)
{
  struct hc_hint out = { 0 };
  bool have_class = false, have_advice = false;

  for (unsigned i = 0; i < r->nrule && !(have_class && have_advice); i++) {
    struct rule *ru = &r->rule[i];
    bool all = true;
    if ((ru->hint.cls == 0 || have_class) && (ru->hint.advice == 0 || have_advice)
        && ru->hint.flags == 0)
      continue; /* nothing this rule could still add */
    for (unsigned k = 0; k < ru->ncond && all; k++)
      all = holds (&ru->cond[k], q, t);
    if (!all)
      continue;
    if (!have_class && ru->hint.cls) {
      out.cls = ru->hint.cls;
      have_class = true;
    }
    if (!have_advice && ru->hint.advice) {
      out.advice = ru->hint.advice;
      have_advice = true;
    }
    out.flags |= ru->hint.flags;
  }
  if ((out.flags & HC_HINT_PATTERN) == HC_HINT_PATTERN)
    out.flags &= ~HC_HINT_RANDOM;
  return out;
}
