/// The console's Mustache templates, its style sheet and its script. They are compiled into
/// the ingress, so the console needs no files beside the executable and nothing from the
/// internet. `{{x}}` escapes HTML; nothing a user or a device wrote is ever put in `{{{x}}}`.
enum ConsoleTemplates {
    static let all: [String: String] = [
        "head": head, "foot": foot, "signin": signin, "overview": overview, "notifications": notifications, "notification": notification,
        "devices": devices, "device": device, "send": send, "sent": sent, "live": live, "problem": problem,
    ]

    static let head = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        {{#refresh}}<meta http-equiv="refresh" content="{{refresh}}">{{/refresh}}
        <title>{{title}} · PushHub console</title>
        <link rel="stylesheet" href="/console/static/console.css">
        <script src="/console/static/console.js" defer></script>
        </head>
        <body>
        <a class="skip" href="#main">Skip to content</a>
        <header>
        <span class="brand">PushHub</span>
        {{#session}}
        <nav aria-label="Console">
        <ul>
        {{#nav}}<li><a href="{{href}}"{{#current}} aria-current="page"{{/current}}>{{label}}</a></li>{{/nav}}
        </ul>
        </nav>
        <form class="signout" method="post" action="/console/signout">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <span>Hub <strong>{{hub}}</strong> as {{who}}</span>
        <button type="submit">Sign out</button>
        </form>
        {{/session}}
        </header>
        <main id="main">
        <h1>{{title}}</h1>
        """

    static let foot = """
        </main>
        </body>
        </html>
        """

    static let signin = """
        {{> head}}
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        <div class="columns">
        <form method="post" action="/console/signin" class="card">
        <h2>With a connection string</h2>
        <input type="hidden" name="method" value="key">
        <label for="key-hub">Hub name</label>
        <input id="key-hub" name="hub" required autocomplete="off" value="{{hub}}">
        <label for="connection-string">Connection string</label>
        <input id="connection-string" name="connectionString" type="password" required autocomplete="off"
          aria-describedby="connection-string-help">
        <p id="connection-string-help" class="help">Endpoint=sb://…;SharedAccessKeyName=…;SharedAccessKey=… The console has the key's rights: a Listen key sees nothing of sends.</p>
        <button type="submit">Sign in</button>
        </form>
        <form method="post" action="/console/signin" class="card">
        <h2>With a console account</h2>
        <input type="hidden" name="method" value="account">
        <label for="account-hub">Hub name</label>
        <input id="account-hub" name="hub" required autocomplete="off" value="{{hub}}">
        <label for="account-name">Account</label>
        <input id="account-name" name="account" required autocomplete="username">
        <label for="account-password">Password</label>
        <input id="account-password" name="password" type="password" required autocomplete="current-password">
        <button type="submit">Sign in</button>
        </form>
        </div>
        {{> foot}}
        """

    static let overview = """
        {{> head}}
        {{^canRead}}<p>This key has the Listen right only: it can register devices, and sees neither the hub's devices nor its sends.</p>{{/canRead}}
        {{#devices}}
        <section aria-labelledby="devices-heading">
        <h2 id="devices-heading">Devices</h2>
        <table>
        <thead><tr><th scope="col">Platform</th><th scope="col">Registrations</th><th scope="col">Installations</th></tr></thead>
        <tbody>
        {{#rows}}<tr><th scope="row">{{platform}}</th><td>{{registrations}}</td><td>{{installations}}</td></tr>{{/rows}}
        </tbody>
        <tfoot><tr><th scope="row">All</th><td>{{registrations}}</td><td>{{installations}}</td></tr></tfoot>
        </table>
        </section>
        {{/devices}}
        {{#activity}}
        <section aria-labelledby="activity-heading">
        <h2 id="activity-heading">Sends</h2>
        <table>
        <thead><tr><th scope="col">Period</th><th scope="col">Sends</th><th scope="col">Targets with a result</th><th scope="col">Delivered</th><th scope="col">Invalid handles pruned</th></tr></thead>
        <tbody>
        {{#periods}}<tr><th scope="row">{{period}}</th><td>{{sends}}</td><td>{{targets}}</td><td>{{delivered}}</td><td>{{pruned}}</td></tr>{{/periods}}
        </tbody>
        </table>
        <h3>Outcomes in the last day</h3>
        {{^hasOutcomes}}<p>No results in the last day.</p>{{/hasOutcomes}}
        {{#hasOutcomes}}
        <table class="outcomes">
        <thead><tr><th scope="col">Outcome</th><th scope="col">Targets</th><th scope="col">Share</th></tr></thead>
        <tbody>
        {{#outcomes}}<tr><th scope="row">{{outcome}}</th><td>{{count}}</td><td><span class="bar" style="--share: {{share}}%"></span> {{share}} %</td></tr>{{/outcomes}}
        </tbody>
        </table>
        {{/hasOutcomes}}
        </section>
        {{/activity}}
        {{#lag}}
        <section aria-labelledby="lag-heading">
        <h2 id="lag-heading">Consumer lag</h2>
        <table>
        <thead><tr><th scope="col">Topic</th><th scope="col">Records not yet read</th></tr></thead>
        <tbody>{{#topics}}<tr><th scope="row">{{topic}}</th><td>{{lag}}</td></tr>{{/topics}}</tbody>
        </table>
        {{^topics}}<p>No consumer has reported its lag yet.</p>{{/topics}}
        {{#unreachable}}<p class="error">Metrics not read from: {{unreachable}}</p>{{/unreachable}}
        </section>
        {{/lag}}
        {{> foot}}
        """

    static let notifications = """
        {{> head}}
        <p>The hub's sends, newest first. A send's page shows its timeline and its failed targets.</p>
        <table>
        <thead><tr><th scope="col">Accepted</th><th scope="col">Notification</th><th scope="col">State</th><th scope="col">Format</th><th scope="col">Audience</th><th scope="col">Targets</th><th scope="col">Results by platform</th></tr></thead>
        <tbody>
        {{#rows}}<tr><td><time datetime="{{enqueued}}">{{enqueuedShown}}</time></td><td><a href="/console/notifications/{{id}}">{{id}}</a></td><td><span class="state {{stateClass}}">{{state}}</span></td><td>{{format}}</td><td>{{audience}}</td><td>{{targets}}</td><td>{{counts}}</td></tr>{{/rows}}
        </tbody>
        </table>
        {{^rows}}<p>No sends yet. Try a <a href="/console/send">test send</a>.</p>{{/rows}}
        {{#older}}<p><a href="/console/notifications?before={{older}}">Older sends</a></p>{{/older}}
        {{> foot}}
        """

    static let notification = """
        {{> head}}
        <dl class="facts">
        <dt>State</dt><dd><span class="state {{stateClass}}" id="state">{{state}}</span>{{#reason}} ({{reason}}){{/reason}}</dd>
        <dt>Format</dt><dd>{{format}}</dd>
        <dt>Audience</dt><dd>{{audience}}</dd>
        <dt>Targets</dt><dd>{{targets}}</dd>
        </dl>
        <h2>Timeline</h2>
        <ol class="timeline">
        {{#timeline}}<li>{{#at}}<time datetime="{{at}}">{{atShown}}</time> {{/at}}{{what}}</li>{{/timeline}}
        </ol>
        {{#refresh}}<p class="help">This page reloads every {{refresh}} seconds until the send ends.</p>{{/refresh}}
        <h2>Results</h2>
        <table id="results">
        <thead><tr><th scope="col">Platform</th><th scope="col">Outcome</th><th scope="col">Targets</th></tr></thead>
        <tbody>{{#counts}}<tr><th scope="row">{{platform}}</th><td>{{outcome}}</td><td>{{count}}</td></tr>{{/counts}}</tbody>
        </table>
        {{^counts}}<p>No results yet.</p>{{/counts}}
        <h2>Failed targets</h2>
        <table id="failed">
        <thead><tr><th scope="col">Target</th><th scope="col">Platform</th><th scope="col">Outcome</th><th scope="col">PNS answer</th><th scope="col">Tries</th></tr></thead>
        <tbody>{{#failed}}<tr><td>{{target}}</td><td>{{platform}}</td><td>{{outcome}}</td><td>{{pns}}</td><td>{{attempts}}</td></tr>{{/failed}}</tbody>
        </table>
        {{^failed}}<p>None.</p>{{/failed}}
        {{#body}}<h2>Body</h2><pre>{{body}}</pre>{{/body}}
        {{> foot}}
        """

    static let devices = """
        {{> head}}
        {{#deleted}}<p class="notice" role="status">{{deleted}}</p>{{/deleted}}
        <form method="get" action="/console/devices" class="search" role="search">
        <div><label for="tags">Tag expression</label><input id="tags" name="tags" value="{{query.tags}}" placeholder="sports &amp;&amp; !politics"></div>
        <div><label for="platform">Platform</label>
        <select id="platform" name="platform">
        <option value="">Any</option>
        {{#platforms}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/platforms}}
        </select></div>
        <div><label for="user">User id</label><input id="user" name="user" value="{{query.user}}"></div>
        <div><label for="handle">Handle starts with</label><input id="handle" name="handle" value="{{query.handle}}"></div>
        <div><button type="submit">Search</button></div>
        </form>
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        {{#searched}}
        <p id="found">{{summary}}</p>
        <table id="devices">
        <thead><tr><th scope="col">Registration</th><th scope="col">Platform</th><th scope="col">Handle</th><th scope="col">Tags</th><th scope="col">Installation</th><th scope="col">User</th></tr></thead>
        <tbody>
        {{#rows}}<tr><td><a href="/console/devices/{{idPath}}">{{id}}</a></td><td>{{platform}}</td><td><code>{{handle}}</code></td><td>{{tags}}</td><td>{{installation}}</td><td>{{user}}</td></tr>{{/rows}}
        </tbody>
        </table>
        {{/searched}}
        {{> foot}}
        """

    static let device = """
        {{> head}}
        {{#registration}}
        <dl class="facts">
        <dt>Registration</dt><dd>{{id}}</dd>
        <dt>Platform</dt><dd>{{platform}} ({{format}})</dd>
        <dt>Handle</dt><dd><code>{{handle}}</code></dd>
        <dt>Tags</dt><dd>{{tags}}</dd>
        {{#installation}}<dt>Installation</dt><dd>{{installation}}</dd>{{/installation}}
        {{#user}}<dt>User</dt><dd>{{user}}</dd>{{/user}}
        {{#expired}}<dt>Push channel</dt><dd>expired</dd>{{/expired}}
        <dt>Updated</dt><dd>{{updated}}</dd>
        </dl>
        {{#hasTemplates}}
        <h2>Templates</h2>
        <table>
        <thead><tr><th scope="col">Name</th><th scope="col">Body</th><th scope="col">Headers</th></tr></thead>
        <tbody>{{#templates}}<tr><th scope="row">{{name}}</th><td><pre>{{body}}</pre></td><td>{{headers}}</td></tr>{{/templates}}</tbody>
        </table>
        {{/hasTemplates}}
        <h2>Recent sends addressed to it</h2>
        <p class="help">Of the hub's last {{examined}} sends, those whose format and tag expression take this device. A failure is shown as its push service answered; PushHub keeps no row per delivered target.</p>
        <table id="sends">
        <thead><tr><th scope="col">Accepted</th><th scope="col">Notification</th><th scope="col">Audience</th><th scope="col">For this device</th></tr></thead>
        <tbody>{{#sends}}<tr><td><time datetime="{{enqueued}}">{{enqueuedShown}}</time></td><td><a href="/console/notifications/{{id}}">{{id}}</a></td><td>{{audience}}</td><td>{{result}}</td></tr>{{/sends}}</tbody>
        </table>
        {{^sends}}<p>None of the recent sends was addressed to it.</p>{{/sends}}
        <form method="post" action="/console/devices/{{idPath}}/delete" class="danger">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <p>{{deleteWhat}}</p>
        <button type="submit" class="danger">Delete</button>
        </form>
        {{/registration}}
        {{> foot}}
        """

    static let send = """
        {{> head}}
        <p>A debug send: the notification goes through the workers to its push service for at most 10 of the devices it matches, and this page shows each one's result.</p>
        {{#error}}<p class="error" role="alert" id="send-error">{{error}}</p>{{/error}}
        <form method="post" action="/console/send" id="send-form">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="format">Format</label>
        <select id="format" name="format" aria-describedby="format-help">
        {{#formats}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/formats}}
        </select>
        <p id="format-help" class="help">A native format goes to that platform's devices; template fills every matching device's template with the body's properties.</p>
        <label for="headers">Headers (one <code>Name: value</code> a line)</label>
        <textarea id="headers" name="headers" rows="3" aria-describedby="headers-help">{{form.headers}}</textarea>
        <p id="headers-help" class="help">Passed to the push service as on the API: <code>apns-push-type</code>, <code>X-WNS-Type</code>, <code>TTL</code>, …</p>
        <label for="payload">Payload</label>
        <textarea id="payload" name="payload" rows="8" required aria-describedby="payload-check">{{form.payload}}</textarea>
        <p id="payload-check" class="check" role="status" aria-live="polite"></p>
        <fieldset>
        <legend>Audience</legend>
        <label for="tags">Tag expression (empty: every device)</label>
        <input id="tags" name="tags" value="{{form.tags}}">
        <label for="devices">Or installation ids, one a line, up to 10</label>
        <textarea id="devices" name="devices" rows="3">{{form.devices}}</textarea>
        </fieldset>
        <button type="submit">Send test</button>
        </form>
        {{> foot}}
        """

    static let sent = """
        {{> head}}
        <p id="summary">{{summary}}</p>
        <table id="results">
        <thead><tr><th scope="col">Platform</th><th scope="col">Handle</th><th scope="col">Registration</th><th scope="col">Result</th></tr></thead>
        <tbody>{{#rows}}<tr><td>{{platform}}</td><td><code>{{handle}}</code></td><td>{{registration}}</td><td class="{{resultClass}}">{{result}}</td></tr>{{/rows}}</tbody>
        </table>
        <p><a href="/console/notifications/{{id}}">The send's page</a> · <a href="/console/send">Another test send</a></p>
        {{> foot}}
        """

    static let live = """
        {{> head}}
        <p>From the processes' own metrics (every hub), sampled every few seconds while this page is open.</p>
        <div id="charts" data-source="/console/live/charts" aria-live="off">{{{charts}}}</div>
        {{> foot}}
        """

    static let problem = """
        {{> head}}
        <p class="error" role="alert">{{message}}</p>
        {{> foot}}
        """

    static let css = """
        :root { color-scheme: light; --ink: #1b1b1b; --muted: #4a4a4a; --link: #0b57d0; --line: #c7c7c7; --bad: #b3261e; --good: #1b5e20; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 16px/1.5 system-ui, sans-serif; color: var(--ink); background: #fff; }
        .skip { position: absolute; left: -999px; }
        .skip:focus { left: 8px; top: 8px; background: #fff; padding: 4px 8px; z-index: 2; }
        header { display: flex; flex-wrap: wrap; align-items: center; gap: 16px; padding: 8px 24px; background: #0b3d91; color: #fff; }
        header a, header button { color: #fff; }
        .brand { font-weight: 700; font-size: 20px; }
        nav ul { display: flex; gap: 4px; list-style: none; margin: 0; padding: 0; }
        nav a { display: block; padding: 6px 10px; border-radius: 4px; text-decoration: none; }
        nav a[aria-current="page"] { background: #fff; color: #0b3d91; font-weight: 600; }
        .signout { margin-left: auto; display: flex; gap: 8px; align-items: center; }
        .signout button { background: transparent; border: 1px solid #fff; }
        main { padding: 8px 24px 48px; max-width: 1200px; }
        a { color: var(--link); }
        :focus-visible { outline: 3px solid #ffbf47; outline-offset: 2px; }
        table { border-collapse: collapse; margin: 8px 0 16px; }
        th, td { text-align: left; padding: 4px 12px 4px 0; border-bottom: 1px solid var(--line); vertical-align: top; }
        thead th { color: var(--muted); font-weight: 600; }
        label { display: block; font-weight: 600; margin-top: 12px; }
        input, select, textarea { font: inherit; padding: 6px 8px; border: 1px solid #6b6b6b; border-radius: 4px; width: 100%; max-width: 640px; color: var(--ink); background: #fff; }
        textarea { font-family: ui-monospace, monospace; }
        button { font: inherit; margin-top: 16px; padding: 8px 16px; border: 0; border-radius: 4px; background: var(--link); color: #fff; cursor: pointer; }
        button.danger { background: var(--bad); }
        fieldset { border: 1px solid var(--line); margin-top: 16px; max-width: 660px; }
        .columns { display: flex; flex-wrap: wrap; gap: 24px; }
        .card { flex: 1 1 360px; border: 1px solid var(--line); border-radius: 8px; padding: 8px 16px 16px; }
        .help { color: var(--muted); font-size: 14px; margin: 4px 0; }
        .error { color: var(--bad); font-weight: 600; }
        .check.ok { color: var(--good); }
        .check.bad { color: var(--bad); font-weight: 600; }
        .notice { color: var(--good); font-weight: 600; }
        .search { display: flex; flex-wrap: wrap; gap: 12px; align-items: end; }
        .search div { flex: 1 1 180px; }
        .facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; }
        .facts dt { font-weight: 600; }
        .facts dd { margin: 0; overflow-wrap: anywhere; }
        .state { padding: 1px 8px; border-radius: 10px; background: #e8eaed; }
        .state.ended { background: #d7f0dc; }
        .state.failed { background: #fbe0de; }
        .bad { color: var(--bad); }
        .good { color: var(--good); }
        .bar { display: inline-block; height: 10px; width: calc(var(--share) * 1.5px); background: #0b57d0; }
        pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f4f4f4; padding: 8px; max-width: 900px; }
        code { overflow-wrap: anywhere; }
        figure { margin: 8px 0 24px; }
        .danger { margin-top: 32px; border-top: 1px solid var(--line); }
        """

    static let js = """
        "use strict";
        // Checks a test send's payload as it is typed, with the API's own checks.
        function watchPayload() {
          const form = document.getElementById("send-form");
          const note = document.getElementById("payload-check");
          if (!form || !note) return;
          let timer = null;
          const check = async () => {
            const body = new URLSearchParams(new FormData(form));
            try {
              const answer = await fetch("/console/send/check", { method: "POST", body, credentials: "same-origin" });
              const result = await answer.json();
              note.textContent = result.message;
              note.className = "check " + (result.ok ? "ok" : "bad");
            } catch (error) {
              note.textContent = "";
            }
          };
          for (const name of ["format", "headers", "payload", "tags"]) {
            const field = form.elements[name];
            if (!field) continue;
            field.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(check, 250); });
            field.addEventListener("change", check);
          }
          check();
        }
        // Redraws the live charts every few seconds.
        function watchCharts() {
          const charts = document.getElementById("charts");
          if (!charts) return;
          const draw = async () => {
            try {
              const answer = await fetch(charts.dataset.source, { credentials: "same-origin" });
              if (answer.ok && !answer.redirected) charts.innerHTML = await answer.text();
            } catch (error) {}
          };
          draw();
          setInterval(draw, 3000);
        }
        document.addEventListener("DOMContentLoaded", () => { watchPayload(); watchCharts(); });
        """
}
