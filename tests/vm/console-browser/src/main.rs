//! `clawos-console-browser`: the web console (specs/console/README.md) in
//! a real browser. Debian's Chromium, driven through chromedriver (the
//! WebDriver protocol, fantoccini), opens the console through the same SSH
//! tunnel an operator uses, and does what an operator does: logs in with
//! the link, chats and watches the answer stream, approves a waiting file
//! write after reading its diff, edits `memory.md` and finds the edit by
//! search, opens every page (a session's context window too, and in a
//! phone-sized window), and is refused
//! where a rebinding name, another site's form or a missing cookie would
//! get in.
//!
//! Test code: it runs on the host (tests/vm/checks/74-console-browser.sh)
//! and is never in the image. Each step is one line of `results.jsonl` in
//! `--out`, `{"step", "ok", "detail", ...figures}`, with a screenshot of
//! each page it saw; the check asserts each line. A step whose start
//! depends on one that failed is reported failed, not skipped.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

/// What the check passes: where chromedriver and the console are, the
/// login link, the agents each step uses, and what the scripted providers
/// stream.
#[derive(Debug, clap::Parser)]
struct Args {
    /// chromedriver's URL (it runs on the host's loopback).
    #[arg(long)]
    webdriver: String,
    /// The console's URL through the tunnel: `http://localhost:PORT`.
    #[arg(long)]
    base: String,
    /// The one-time login link `clawctl console` printed.
    #[arg(long)]
    login: String,
    /// The box's name, the overview's heading.
    #[arg(long)]
    box_name: String,
    /// The agent to chat with; its provider streams `--tokens`.
    #[arg(long)]
    chat_agent: String,
    /// The words of its answer, one per streamed event, in order.
    #[arg(long, value_delimiter = ',')]
    tokens: Vec<String>,
    /// The supervised agent whose `file_write` waits for approval.
    #[arg(long)]
    approve_agent: String,
    /// The content its write would put in its file.
    #[arg(long)]
    write_content: String,
    /// The agent another site's form tries to pause.
    #[arg(long)]
    pause_agent: String,
    /// A command run while ten pages are open (the console's RSS).
    #[arg(long)]
    while_open: String,
    /// Where results.jsonl and the screenshots go.
    #[arg(long)]
    out: PathBuf,
}

/// A step's figures and notes when it passed, or why it failed.
type Outcome = Result<Value, String>;

/// How long a step waits for what it expects.
const PATIENCE: Duration = Duration::from_secs(120);

struct Browser {
    client: Client,
    args: Args,
}

fn failed<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |error| format!("{what}: {error}")
}

impl Browser {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.args.base)
    }

    async fn goto(&self, path: &str) -> Result<(), String> {
        self.client.goto(&self.url(path)).await.map_err(failed(path))
    }

    /// Runs `script` (a function body; `arguments` are `args`) until it
    /// returns something other than null or false, or `PATIENCE` runs out.
    async fn wait_for(&self, what: &str, script: &str, args: Vec<Value>) -> Result<Value, String> {
        let start = Instant::now();
        loop {
            let value = self.client.execute(script, args.clone()).await.map_err(failed(what))?;
            if !matches!(value, Value::Null | Value::Bool(false)) {
                return Ok(value);
            }
            if start.elapsed() > PATIENCE {
                let text = self.body_text().await.unwrap_or_default();
                return Err(format!("{what}: not within {PATIENCE:?}; the page says: {}", clip(&text)));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn body_text(&self) -> Result<String, String> {
        let text = self.client.execute("return document.body ? document.body.innerText : ''", vec![]).await;
        Ok(text.map_err(failed("the page's text"))?.as_str().unwrap_or_default().to_owned())
    }

    /// The page's `<h1>`, or an error naming what it was instead.
    async fn heading(&self) -> Result<String, String> {
        let h1 = self.client.find(Locator::Css("h1")).await;
        match h1 {
            Ok(h1) => h1.text().await.map_err(failed("the heading")),
            Err(_) => Err(format!("no heading; the page says: {}", clip(&self.body_text().await?))),
        }
    }

    async fn screenshot(&self, name: &str) {
        match self.client.screenshot().await {
            Ok(png) => {
                if let Err(error) = std::fs::write(self.args.out.join(format!("{name}.png")), png) {
                    eprintln!("{name}.png: {error}");
                }
            }
            Err(error) => eprintln!("a screenshot of {name}: {error}"),
        }
    }

    async fn click(&self, css: &str) -> Result<(), String> {
        let element = self.client.find(Locator::Css(css)).await.map_err(failed(css))?;
        element.click().await.map_err(failed(css))
    }

    /// Types `message` into the chat box and sends it, after installing an
    /// observer that notes when each of `markers` first shows in the turns.
    async fn send(&self, message: &str, markers: &[String]) -> Result<(), String> {
        self.client
            .execute(
                "const markers = arguments[0], turns = document.getElementById('turns');
                 window.seen = {};
                 new MutationObserver(() => {
                   const text = turns.innerText, now = Date.now();
                   for (const m of markers) if (!(m in window.seen) && text.includes(m)) window.seen[m] = now;
                 }).observe(turns, {childList: true, subtree: true, characterData: true});",
                vec![json!(markers)],
            )
            .await
            .map_err(failed("the observer"))?;
        let input = self.client.find(Locator::Css("#message")).await.map_err(failed("the message box"))?;
        input.send_keys(message).await.map_err(failed("typing"))?;
        self.client.execute("window.sent = Date.now()", vec![]).await.map_err(failed("the clock"))?;
        self.click("form[action^='/chat/'] button[type='submit']").await
    }

    /// The last turn's text once its outcome line shows.
    async fn turn_end(&self) -> Result<String, String> {
        let script = "const turn = [...document.querySelectorAll('#turns .turn')].pop();
                      return turn && turn.querySelector('.outcome-line') ? turn.innerText : null;";
        let text = self.wait_for("the turn's end", script, vec![]).await?;
        Ok(text.as_str().unwrap_or_default().to_owned())
    }

    async fn login(&self) -> Outcome {
        self.client.goto(&self.args.login).await.map_err(failed("the login link"))?;
        let heading = self.heading().await?;
        if heading != self.args.box_name {
            return Err(format!("the overview's heading is {heading:?}"));
        }
        let url = self.client.current_url().await.map_err(failed("the URL"))?;
        if url.path() != "/" {
            return Err(format!("the link led to {url}"));
        }
        // The session cookie is HttpOnly: no script on the page can read it.
        let cookie = self.client.execute("return document.cookie", vec![]).await.map_err(failed("cookie"))?;
        if cookie != json!("") {
            return Err(format!("a script reads the cookie: {cookie}"));
        }
        // From the link's request to the overview's load event, the
        // redirect included (the Navigation Timing entry of this page).
        let load = self
            .client
            .execute(
                "const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime;",
                vec![],
            )
            .await
            .map_err(failed("the navigation timing"))?;
        self.screenshot("overview").await;
        Ok(json!({"first_load_ms": load}))
    }

    async fn chat(&self) -> Outcome {
        let agent = &self.args.chat_agent;
        self.goto(&format!("/chat/{agent}")).await?;
        self.send("Tell me something, one word at a time.", &self.args.tokens).await?;
        let text = self.turn_end().await?;
        self.screenshot("chat").await;
        let answer = self.args.tokens.join(" ");
        if !text.contains(&answer) || !text.contains("Done") {
            return Err(format!("the turn ended as: {}", clip(&text)));
        }
        let seen = self.client.execute("return [window.sent, window.seen]", vec![]).await.map_err(failed("seen"))?;
        let sent = seen[0].as_f64().unwrap_or_default();
        let shown: Vec<f64> = self.args.tokens.iter().map(|t| seen[1][t].as_f64().unwrap_or(f64::NAN)).collect();
        if shown.iter().any(|t| t.is_nan()) {
            return Err(format!("not every word was seen arriving: {seen}"));
        }
        // Streamed, not shown at once: the words came in order, spread over time.
        if shown.windows(2).any(|pair| pair[1] < pair[0]) {
            return Err(format!("the words came out of order: {shown:?}"));
        }
        Ok(json!({"sent_ms": sent, "shown_ms": shown, "spread_ms": shown[shown.len() - 1] - shown[0]}))
    }

    async fn approve(&self) -> Outcome {
        let agent = &self.args.approve_agent;
        self.goto(&format!("/chat/{agent}")).await?;
        self.send("Save the note.", &[]).await?;
        let text = self.turn_end().await?;
        if !text.contains("waiting") {
            return Err(format!("the turn did not wait for approval: {}", clip(&text)));
        }
        self.click("a[href='/approvals']").await?;
        let card = format!("article[aria-labelledby^='approval-'] button[aria-label='Approve file_write for {agent}']");
        self.wait_for("the approval", "return document.querySelector(arguments[0]) !== null", vec![json!(card)])
            .await?;
        let diff = self.client.find(Locator::Css(".diff")).await.map_err(failed("the diff"))?;
        let diff = diff.text().await.map_err(failed("the diff"))?;
        self.screenshot("approvals").await;
        let wanted = format!("+ {}", self.args.write_content);
        if !diff.contains(&wanted) {
            return Err(format!("the diff does not add {wanted:?}: {diff}"));
        }
        self.click(&card).await?;
        let text = self.turn_end().await?;
        self.screenshot("approved").await;
        if !text.contains("Done") {
            return Err(format!("after the approval the turn ended as: {}", clip(&text)));
        }
        Ok(json!({"diff": diff}))
    }

    async fn memory(&self, marker: &str) -> Outcome {
        let agent = &self.args.chat_agent;
        self.goto(&format!("/memory/{agent}")).await?;
        self.click("a[aria-label='Edit memory.md']").await?;
        let area = self.client.find(Locator::Css("#content")).await.map_err(failed("the text area"))?;
        // Typed at the end of the text, as a person would.
        area.send_keys(&format!("\nThe console wrote {marker} here.\n")).await.map_err(failed("typing"))?;
        self.screenshot("memory-edit").await;
        self.click("form[action$='/edit'] button[type='submit']").await?;
        let saved = "return location.search.includes('saved=memory.md')";
        self.wait_for("the saved page", saved, vec![]).await?;
        // fs-engine re-indexes a changed file 300 ms after its change: the
        // search finds the edit by its words at once after that.
        let start = Instant::now();
        loop {
            self.goto(&format!("/memory/{agent}?q={marker}")).await?;
            let hits = self.client.execute(
                "const hit = [...document.querySelectorAll('.hits li')].find(li => li.innerText.includes(arguments[0]));
                 return hit ? hit.innerText : null;",
                vec![json!(marker)],
            );
            if let Value::String(hit) = hits.await.map_err(failed("the hits"))? {
                self.screenshot("memory-search").await;
                if !hit.contains("memory.md") || !hit.contains("keyword") || !hit.contains("vector") {
                    return Err(format!("the hit lacks its provenance or scores: {hit}"));
                }
                return Ok(json!({"found_after_ms": start.elapsed().as_millis(), "hit": hit}));
            }
            if start.elapsed() > PATIENCE {
                self.screenshot("memory-search").await;
                return Err(format!("the edit was not found by search: {}", clip(&self.body_text().await?)));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn pages(&self) -> Outcome {
        let chat = format!("/chat/{}", self.args.chat_agent);
        let pages = [
            ("/agents", "Agents"),
            ("/tools", "Tools"),
            ("/secrets", "Secrets"),
            ("/schedules", "Schedules"),
            ("/notifications", "Notifications"),
        ];
        let mut figures = serde_json::Map::new();
        for (path, title) in pages {
            self.goto(path).await?;
            let heading = self.heading().await?;
            self.screenshot(&path[1..]).await;
            if heading != title {
                return Err(format!("{path}: the heading is {heading:?}"));
            }
            // Every control has a label a screen reader reads out.
            let unlabelled = self
                .client
                .execute(
                    "return [...document.querySelectorAll('input:not([type=hidden]), textarea, select, button')]
                       .filter(e => e.labels.length === 0 && !e.getAttribute('aria-label') && !e.innerText.trim())
                       .map(e => e.outerHTML)",
                    vec![],
                )
                .await
                .map_err(failed("labels"))?;
            if unlabelled != json!([]) {
                return Err(format!("{path}: controls without a label: {unlabelled}"));
            }
        }
        // The chat's session, then what its context window holds.
        self.goto(&chat).await?;
        self.click("nav.sessions a:not([aria-current])").await?;
        self.click("a[href^='/context/']").await?;
        let heading = self.heading().await?;
        let parts = self.body_text().await?;
        self.screenshot("context").await;
        for part in ["persona", "soul.md", "#1 user", "Together"] {
            if !heading.starts_with("Context of ") || !parts.contains(part) {
                return Err(format!("the context page ({heading}) lacks {part:?}: {}", clip(&parts)));
            }
        }
        // A phone-sized window: nothing wider than the screen.
        self.client.set_window_size(390, 844).await.map_err(failed("the window"))?;
        for path in ["/agents", chat.as_str(), "/tools"] {
            self.goto(path).await?;
            let overflow = self
                .client
                .execute("return document.documentElement.scrollWidth - document.documentElement.clientWidth", vec![])
                .await
                .map_err(failed("the width"))?;
            self.screenshot(&format!("narrow-{}", path[1..].replace('/', "-"))).await;
            if overflow.as_f64().unwrap_or(1.0) > 0.0 {
                return Err(format!("{path} is {overflow} px wider than a 390 px window"));
            }
            figures.insert(path.to_owned(), json!("fits"));
        }
        self.client.set_window_size(1280, 1000).await.map_err(failed("the window"))?;
        Ok(Value::Object(figures))
    }

    /// Ten pages open at once (the chat pages and the overview), then the
    /// check's command (the console's RSS) while they are.
    async fn ten_pages(&self) -> Outcome {
        let mut windows = Vec::new();
        for n in 0..10 {
            let window = self.client.new_window(true).await.map_err(failed("a new tab"))?;
            self.client.switch_to_window(window.handle.clone()).await.map_err(failed("a tab"))?;
            let path = if n % 2 == 0 { format!("/chat/{}", self.args.chat_agent) } else { "/".to_owned() };
            self.goto(&path).await?;
            windows.push(window.handle);
        }
        let output = std::process::Command::new("bash")
            .args(["-c", &self.args.while_open])
            .output()
            .map_err(failed("the command"))?;
        let printed = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if !output.status.success() {
            return Err(format!("`{}` failed: {}", self.args.while_open, String::from_utf8_lossy(&output.stderr)));
        }
        for window in windows {
            self.client.switch_to_window(window).await.map_err(failed("a tab"))?;
            self.client.close_window().await.map_err(failed("closing a tab"))?;
        }
        let first = self.client.windows().await.map_err(failed("the tabs"))?;
        let first = first.into_iter().next().ok_or("no tab left")?;
        self.client.switch_to_window(first).await.map_err(failed("the first tab"))?;
        Ok(json!({"while_open": printed}))
    }

    async fn refusals(&self) -> Outcome {
        let port = self.args.base.rsplit(':').next().unwrap_or_default();
        // A name that resolves to loopback but is not the console's own,
        // as DNS rebinding would have it: Chromium resolves *.localhost to
        // loopback by itself.
        self.client.goto(&format!("http://rebind.localhost:{port}/")).await.map_err(failed("rebind"))?;
        let text = self.body_text().await?;
        self.screenshot("refused-host").await;
        if !text.contains("answers only at localhost") {
            return Err(format!("another Host: {}", clip(&text)));
        }
        // Another site's form posting to the console (its Origin is not
        // the console's; SameSite=Strict also keeps the cookie off it).
        let form = format!(
            "data:text/html,<form method=post action='{}/agents/{}/pause'><button id=go>Pause</button></form>",
            self.args.base, self.args.pause_agent
        );
        self.client.goto(&form).await.map_err(failed("another site"))?;
        self.click("#go").await?;
        let text = self
            .wait_for("the refusal", "return document.body && document.body.innerText.includes('console')", vec![])
            .await
            .and(self.body_text().await)?;
        self.screenshot("refused-origin").await;
        if !text.contains("A change must come from the console's own pages") {
            return Err(format!("another site's form: {}", clip(&text)));
        }
        // Without the cookie, a page says how to log in.
        self.client.delete_all_cookies().await.map_err(failed("cookies"))?;
        self.goto("/agents").await?;
        let text = self.body_text().await?;
        self.screenshot("refused-cookie").await;
        if !text.contains("This page needs a console session") {
            return Err(format!("without a cookie: {}", clip(&text)));
        }
        Ok(json!({}))
    }
}

fn clip(text: &str) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(400) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    if let Err(error) = std::fs::create_dir_all(&args.out) {
        eprintln!("{}: {error}", args.out.display());
        return ExitCode::FAILURE;
    }
    let results = args.out.join("results.jsonl");
    let mut results = match std::fs::File::create(&results) {
        Ok(file) => file,
        Err(error) => {
            eprintln!("{}: {error}", results.display());
            return ExitCode::FAILURE;
        }
    };
    let profile = args.out.join("profile");
    let capabilities = json!({
        "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            // Root on a build machine: no user namespaces for Chromium's
            // sandbox. The browser runs only this test's pages.
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--no-first-run", "--no-proxy-server", "--window-size=1280,1000",
                     format!("--user-data-dir={}", profile.display())],
        }
    });
    let Value::Object(capabilities) = capabilities else { unreachable!() };
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let client = match ClientBuilder::new(connector).capabilities(capabilities).connect(&args.webdriver).await {
        Ok(client) => client,
        Err(error) => {
            eprintln!("chromedriver at {}: {error}", args.webdriver);
            return ExitCode::FAILURE;
        }
    };
    let browser = Browser { client, args };
    let marker = "quokka-4412";
    let mut all_ok = true;
    let mut logged_in = false;
    for step in ["login", "chat", "approve", "memory", "pages", "ten-pages", "refusals"] {
        let started = Instant::now();
        let outcome = match step {
            "login" => browser.login().await,
            _ if !logged_in => Err("not run: the login failed".to_owned()),
            "chat" => browser.chat().await,
            "approve" => browser.approve().await,
            "memory" => browser.memory(marker).await,
            "pages" => browser.pages().await,
            "ten-pages" => browser.ten_pages().await,
            _ => browser.refusals().await,
        };
        logged_in |= step == "login" && outcome.is_ok();
        if outcome.is_err() {
            browser.screenshot(&format!("{step}-failed")).await;
        }
        let seconds = started.elapsed().as_secs_f64();
        let line = match outcome {
            Ok(figures) => json!({"step": step, "ok": true, "seconds": seconds, "figures": figures}),
            Err(detail) => {
                all_ok = false;
                json!({"step": step, "ok": false, "seconds": seconds, "detail": detail})
            }
        };
        println!("{line}");
        if let Err(error) = writeln!(results, "{line}") {
            eprintln!("results.jsonl: {error}");
            all_ok = false;
        }
    }
    if let Err(error) = browser.client.close().await {
        eprintln!("closing the browser: {error}");
    }
    if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
