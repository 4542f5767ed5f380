/* The replay report: the latency buckets' bounds, and the HTML page built
 * from a small synthetic grid (three strategies at two cache sizes, the
 * oracle and a Belady row) — a doctype, balanced tags, three plots, every
 * strategy named, hostile titles and policy names escaped, no NaN leaking
 * into the markup, the same bytes twice — and the degenerate inputs (no
 * rows, one size, no accesses).
 *
 * `test_report browser` renders the grid's page with headless Chromium (the
 * binary $CHROMIUM names, else /usr/bin/chromium or chromium-browser) to a
 * PNG of the window's size, which must be a real picture; it exits 77
 * (skipped) when there is no such binary.  Its files go to $TMPDIR (or
 * /tmp). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hintcache/replay.h"
#include "test.h"

/* Builds a histogram of n reads: a share `hit` near 60 µs (flash), the rest
 * spread over 1–4 ms (the slow tier), so each CDF has two steps. */
static void
fill_hist (struct hc_replay_row *r, uint64_t n, double hit)
{
  uint64_t hits = (uint64_t) ((double) n * hit), rest = n - hits;

  memset (r->latency_hist, 0, sizeof r->latency_hist);
  for (unsigned i = 0; i < 4; i++)
    r->latency_hist[46 + i] += hits / 4 + (i == 0 ? hits % 4 : 0);
  for (unsigned i = 0; i < 16; i++)
    r->latency_hist[80 + i] += rest / 16 + (i == 0 ? rest % 16 : 0);
  r->read_requests = n;
}

/* Fills one row with numbers that look like a replay's. */
static void
make_row (struct hc_replay_row *r, enum hc_strategy s, const char *policy, uint64_t blocks,
          double miss)
{
  memset (r, 0, sizeof *r);
  r->strategy = s;
  snprintf (r->policy, sizeof r->policy, "%s", policy);
  r->cache_blocks = blocks;
  r->accesses = 1000000;
  r->misses = (uint64_t) (miss * 1e6);
  r->read_accesses = 700000;
  r->read_misses = (uint64_t) (miss * 0.9 * 7e5);
  r->write_accesses = 300000;
  r->write_misses = r->misses - r->read_misses;
  r->admissions = r->misses / 2;
  r->slow_reads = r->read_misses / 4;
  r->slow_writes = r->write_misses / 8;
  r->flash_bytes_written = (r->admissions + 250000) * 4096ull;
  fill_hist (r, 200000, 1 - miss * 0.9);
  r->mean_read_latency_us = 60 + miss * 3000;
  r->p99_read_latency_us = 3800;
}

/* The synthetic grid: none, process and io under hintaware at two sizes,
 * then the oracle at both sizes and Belady at the larger; returns the count. */
static size_t
make_grid (struct hc_replay_row *rows)
{
  static const enum hc_strategy strat[3] = { HC_STRATEGY_NONE, HC_STRATEGY_PROCESS,
                                             HC_STRATEGY_IO };
  static const uint64_t sizes[2] = { 2000, 20000 };
  size_t n = 0;

  for (unsigned s = 0; s < 3; s++)
    for (unsigned z = 0; z < 2; z++)
      make_row (&rows[n++], strat[s], "hintaware", sizes[z], 0.6 - 0.1 * s - 0.2 * z);
  for (unsigned z = 0; z < 2; z++)
    make_row (&rows[n++], HC_STRATEGY_ORACLE, "oracle", sizes[z], 0.25 - 0.1 * z);
  make_row (&rows[n++], HC_STRATEGY_NONE, "belady", sizes[1], 0.2);
  return n;
}

/* Counts the occurrences of `needle` in `hay`. */
static unsigned
count (const char *hay, const char *needle)
{
  unsigned n = 0;

  for (const char *p = hay; (p = strstr (p, needle)); p += strlen (needle))
    n++;
  return n;
}

/* True if the elements of an HTML text nest properly: every start tag that
 * is not void or self-closing is closed, innermost first.  Enough of a
 * parser for markup we write ourselves (no '>' inside attribute values). */
static bool
balanced (const char *html)
{
  static const char *const voids[] = { "meta", "br", "hr", "img", "input", "link", "wbr" };
  char stack[256][24];
  unsigned depth = 0;

  for (const char *p = html; (p = strchr (p, '<')); ) {
    const char *end = strchr (p, '>');
    char name[24];
    size_t n = 0;
    bool closing = p[1] == '/';

    if (!end)
      return false;
    if (p[1] == '!') { /* doctype or comment */
      p = end + 1;
      continue;
    }
    for (const char *q = p + 1 + closing; q < end && *q != ' ' && *q != '/' && *q != '\n'; q++)
      if (n < sizeof name - 1)
        name[n++] = *q;
    name[n] = '\0';
    if (!n)
      return false;
    if (closing) {
      if (!depth || strcmp (stack[depth - 1], name) != 0) {
        fprintf (stderr, "unbalanced </%s> (open: %s)\n", name, depth ? stack[depth - 1] : "-");
        return false;
      }
      depth--;
    } else if (end[-1] != '/') {
      bool is_void = false;

      for (size_t i = 0; i < sizeof voids / sizeof voids[0]; i++)
        is_void |= strcmp (name, voids[i]) == 0;
      if (!is_void) {
        if (depth == 256)
          return false;
        strcpy (stack[depth++], name);
      }
    }
    p = end + 1;
  }
  if (depth)
    fprintf (stderr, "unclosed <%s>\n", stack[depth - 1]);
  return depth == 0;
}

/* Checks what every page must be, whatever its input. */
static void
check_page (const char *html, size_t len, const char *what)
{
  CHECK (strlen (html) == len, "%s: length matches", what);
  CHECK (strncmp (html, "<!DOCTYPE html>", 15) == 0, "%s: starts with the doctype", what);
  CHECK (balanced (html), "%s: tags balance", what);
  CHECK_EQ (count (html, "<svg"), 3u, "%s: three plots", what);
  CHECK_EQ (count (html, "</svg>"), 3u, "%s: three plots closed", what);
  CHECK (!strstr (html, "<script"), "%s: no script", what);
  CHECK (!strstr (html, "nan") && !strstr (html, "NaN"), "%s: no NaN in the markup", what);
  CHECK (!strstr (html, "inf"), "%s: no infinity in the markup", what);
  CHECK (!strstr (html, "http://") || count (html, "http://") == count (html, "xmlns=\"http://"),
         "%s: no external resources", what);
}

/* Removes one entry of a temporary tree (nftw callback). */
static int
rm_entry (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void) st, (void) flag, (void) ftw;
  return remove (path);
}

/* The Chromium binary to render with: the one $CHROMIUM names if set (NULL
 * if that is not executable), else the first of the usual ones; or NULL. */
static const char *
find_chromium (void)
{
  static const char *const paths[] = { "/usr/bin/chromium", "/usr/bin/chromium-browser" };
  const char *env = getenv ("CHROMIUM");

  if (env && env[0])
    return access (env, X_OK) == 0 ? env : NULL;
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
    if (access (paths[i], X_OK) == 0)
      return paths[i];
  return NULL;
}

/* The window, and so the screenshot: wide and tall enough for the three
 * plots and the table. */
#define WIDTH 1200
#define HEIGHT 1800
#define STR_(x) #x
#define STR(x) STR_ (x)
#define WIDTH_S STR (WIDTH)
#define HEIGHT_S STR (HEIGHT)

/* Runs Chromium headless on `html_path`, screenshotting into `png`, its
 * output going to `log`.  Kills its whole process group after 60 s, since a
 * browser that hangs must not hang the test.  Returns its exit status, or
 * -1 if it could not run or timed out. */
static int
run_chromium (const char *bin, const char *dir, const char *html_path, const char *png,
              const char *log)
{
  char profile[512], shot[600], url[600];
  struct timespec tick = { 0, 100 * 1000 * 1000 };
  pid_t pid;
  int status;

  snprintf (profile, sizeof profile, "--user-data-dir=%s/profile", dir);
  snprintf (shot, sizeof shot, "--screenshot=%s", png);
  snprintf (url, sizeof url, "file://%s", html_path);
  fflush (NULL);
  pid = fork ();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    int fd = open (log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

    setpgid (0, 0);
    if (fd >= 0) {
      dup2 (fd, 1);
      dup2 (fd, 2);
      close (fd);
    }
    execl (bin, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", profile, "--window-size=" WIDTH_S "," HEIGHT_S, shot, url,
           (char *) NULL);
    _exit (127);
  }
  setpgid (pid, pid); /* also here, so the kill below cannot race the child's own call */
  for (unsigned i = 0; i < 600; i++) {
    pid_t w = waitpid (pid, &status, WNOHANG);

    if (w == pid)
      return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
    if (w < 0)
      return -1;
    nanosleep (&tick, NULL);
  }
  fprintf (stderr, "chromium did not finish in 60 s; killed\n");
  kill (-pid, SIGKILL);
  waitpid (pid, &status, 0);
  return -1;
}

/* Renders the page to a PNG with Chromium, and checks the picture is a
 * real rendering: a PNG of the window's size, of more than 20 KB, which a
 * blank or error page does not reach.  Exits 77 without Chromium. */
static int
check_rendering (const char *html, size_t len)
{
  static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
  const char *bin = find_chromium (), *env = getenv ("CHROMIUM");
  char dir[256], path[300], png[300], log[300];
  unsigned char head[24] = { 0 };
  struct stat st;
  FILE *f;
  int rc;

  if (!bin) {
    if (env && env[0])
      return test_skip ("test_report browser", "CHROMIUM=%s is not an executable", env);
    return test_skip ("test_report browser", "no Chromium (/usr/bin/chromium or "
                      "/usr/bin/chromium-browser; or set CHROMIUM)");
  }
  snprintf (dir, sizeof dir, "%s/hc-report-XXXXXX", test_tmp ());
  if (!mkdtemp (dir)) {
    CHECK (0, "mkdtemp %s: %s", dir, strerror (errno));
    return 0;
  }
  snprintf (path, sizeof path, "%s/report.html", dir);
  snprintf (png, sizeof png, "%s/report.png", dir);
  snprintf (log, sizeof log, "%s/chromium.log", dir);
  f = fopen (path, "w");
  CHECK (f && fwrite (html, 1, len, f) == len && fclose (f) == 0, "wrote %s", path);

  rc = run_chromium (bin, dir, path, png, log);
  CHECK_EQ (rc, 0, "%s rendered the page (log: %s)", bin, log);
  st.st_size = 0;
  CHECK (stat (png, &st) == 0, "the screenshot %s exists", png);
  f = fopen (png, "rb");
  /* The signature, then the IHDR chunk: length 13, type, width, height. */
  CHECK (f && fread (head, 1, 24, f) == 24 && memcmp (head, sig, 8) == 0, "%s is a PNG", png);
  if (f)
    fclose (f);
  uint32_t w = (uint32_t) head[16] << 24 | (uint32_t) head[17] << 16 | head[18] << 8 | head[19];
  uint32_t h = (uint32_t) head[20] << 24 | (uint32_t) head[21] << 16 | head[22] << 8 | head[23];
  CHECK (memcmp (head + 12, "IHDR", 4) == 0 && w == WIDTH && h == HEIGHT,
         "%s is %u x %u, the window's size", png, w, h);
  CHECK (st.st_size > 20 * 1024, "%s is a real rendering (%lld bytes)", png,
         (long long) st.st_size);
  if (test_failures)
    fprintf (stderr, "kept %s for inspection\n", dir);
  else {
    printf ("test_report browser: %s rendered the report: a %u x %u PNG of %lld bytes\n", bin, w,
            h, (long long) st.st_size);
    nftw (dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
  return 0;
}

/* The grid's summary and hostile title. */
static const struct hc_replay_summary grid_summary = {
  .requests = 123456, .reads = 80000, .writes = 40000, .discards = 3000, .flushes = 456,
  .block_accesses = 1000000, .footprint_blocks = 262144, .skipped_lines = 2,
  .first_bad_line = 17,
};
static const char grid_title[] = "<script>alert('x')</script> & co";

/* `test_report browser`: the grid's page, rendered. */
static int
test_browser (void)
{
  struct hc_replay_row rows[16];
  size_t n = make_grid (rows), len;
  char *html = NULL;
  int rc;

  CHECK_EQ (hc_replay_report_html (rows, n, &grid_summary, grid_title, &html, &len), 0,
            "report built");
  if (!html)
    return test_exit ("test_report browser");
  check_page (html, len, "grid");
  rc = check_rendering (html, len);
  free (html);
  return rc ? rc : test_exit ("test_report browser");
}

int
main (int argc, char **argv)
{
  struct hc_replay_row rows[16];
  struct hc_replay_summary sm = grid_summary;
  size_t n = make_grid (rows), len, len2;
  char *html = NULL, *again = NULL;

  if (argc > 1) {
    if (argc == 2 && strcmp (argv[1], "browser") == 0)
      return test_browser ();
    fprintf (stderr, "usage: test_report [browser]\n");
    return 2;
  }

  /* Buckets: 8 per octave from 1 µs, rising. */
  CHECK (fabs (hc_lat_bucket_us (0) - exp2 (0.125)) < 1e-12, "bucket 0 ends at 2^(1/8) µs");
  CHECK_EQ (hc_lat_bucket_us (7), 2.0, "bucket 7 ends at 2 µs");
  CHECK_EQ (hc_lat_bucket_us (HC_LAT_BUCKETS - 1), exp2 (HC_LAT_BUCKETS / 8.0),
            "the last ends nominally at 2^(HC_LAT_BUCKETS/8) µs");
  CHECK (isinf (hc_lat_bucket_us (HC_LAT_BUCKETS)), "past the last: infinity");
  for (unsigned i = 1; i < HC_LAT_BUCKETS; i++)
    CHECK (hc_lat_bucket_us (i) > hc_lat_bucket_us (i - 1), "bucket %u rises", i);

  /* The grid, with a hostile title. */
  CHECK_EQ (hc_replay_report_html (rows, n, &sm, grid_title, &html, &len), 0, "report built");
  if (!html)
    return test_exit ("test_report");
  check_page (html, len, "grid");
  CHECK (strstr (html, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co"),
         "the title is escaped");
  static const char *const names[] = { ">none<", ">process<", ">io<", ">oracle<" };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    CHECK (strstr (html, names[i]), "names %s", names[i]);
  CHECK (strstr (html, "belady"), "names belady");
  CHECK (strstr (html, "123,456"), "the summary's request count, grouped");
  CHECK (strstr (html, "1.00 GiB"), "the footprint in GiB");
  CHECK (strstr (html, "0.6000"), "a miss ratio in the table");
  CHECK_EQ (count (html, "<tr>"), (unsigned) n + 1, "a table row per result and a header");
  CHECK (count (html, "<polyline") >= 5 + 5, "lines in the miss and CDF plots");

  /* Deterministic: the same input gives the same bytes. */
  CHECK_EQ (hc_replay_report_html (rows, n, &sm, grid_title, &again, &len2), 0, "built again");
  CHECK (again && len2 == len && memcmp (again, html, len) == 0, "the same bytes twice");
  free (again);
  free (html);

  /* A hostile policy name filling its array (no NUL in it). */
  memset (rows[0].policy, '<', sizeof rows[0].policy);
  CHECK_EQ (hc_replay_report_html (rows, n, &sm, NULL, &html, &len), 0, "hostile policy");
  if (html) {
    check_page (html, len, "hostile policy");
    CHECK (strstr (html, "hintcache replay report"), "a default title");
    CHECK (!strstr (html, "<<"), "the policy is escaped");
    free (html);
  }

  /* No rows, no summary. */
  html = NULL;
  CHECK_EQ (hc_replay_report_html (NULL, 0, NULL, NULL, &html, &len), 0, "an empty report");
  if (html) {
    check_page (html, len, "no rows");
    CHECK (count (html, "No data") == 3, "three empty plots with a note");
    free (html);
  }

  /* One size, no accesses, NaN latencies, an unknown strategy. */
  n = make_grid (rows);
  for (size_t i = 0; i < n; i++) {
    rows[i].cache_blocks = 5000;
    rows[i].accesses = rows[i].misses = rows[i].read_accesses = rows[i].read_misses = 0;
    rows[i].read_requests = 0;
    rows[i].mean_read_latency_us = rows[i].p99_read_latency_us = NAN;
    memset (rows[i].latency_hist, 0, sizeof rows[i].latency_hist);
  }
  rows[0].strategy = (enum hc_strategy) 42;
  CHECK_EQ (hc_replay_report_html (rows, n, &sm, "", &html, &len), 0, "a degenerate grid");
  if (html) {
    check_page (html, len, "degenerate");
    CHECK (strstr (html, "strategy 42"), "an unknown strategy by number");
    CHECK (count (html, "No data") == 2, "miss and CDF plots empty, bars drawn");
    free (html);
  }

  /* One size with data: markers without lines. */
  n = make_grid (rows);
  for (size_t i = 0; i < n; i++)
    rows[i].cache_blocks = 5000;
  CHECK_EQ (hc_replay_report_html (rows, n, &sm, "one size", &html, &len), 0, "one size");
  if (html) {
    check_page (html, len, "one size");
    CHECK (!strstr (html, "No data"), "every plot drawn");
    free (html);
  }

  CHECK_EQ (hc_replay_report_html (rows, n, &sm, "x", NULL, &len), -EINVAL, "no output pointer");
  CHECK_EQ (hc_replay_report_html (NULL, 3, &sm, "x", &html, &len), -EINVAL, "rows missing");
  return test_exit ("test_report");
}
