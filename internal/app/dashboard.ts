// A one-page live check served by the API: polls /insights/{p}/live, /insights/{p}/metrics
// and the Prometheus /metrics with a read client's credentials typed into the page.
export const DASHBOARD_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Tidemark live check</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body{font:15px/1.4 system-ui,sans-serif;margin:2rem;max-width:60rem;color:#1b2430}
 input{font:inherit;padding:.3rem;margin:.2rem;width:18rem} button{font:inherit;padding:.3rem .8rem}
 .grid{display:grid;grid-template-columns:repeat(3,1fr);gap:1rem;margin-top:1rem}
 .card{border:1px solid #d0d7de;border-radius:8px;padding:1rem}
 .big{font-size:2.2rem;font-weight:600} .muted{color:#57606a;font-size:.85rem}
 table{border-collapse:collapse;width:100%} td,th{text-align:left;padding:.2rem .4rem;border-bottom:1px solid #eee}
 #err{color:#b42318}
</style></head><body>
<h1>Tidemark live check</h1>
<form id="f"><input id="p" placeholder="project id" required><input id="i" placeholder="read client id" required>
<input id="s" placeholder="read client secret" type="password" required><button>Watch</button></form>
<p id="err"></p>
<div class="grid">
 <div class="card"><div class="muted">live visitors (5 min)</div><div class="big" id="live">–</div></div>
 <div class="card"><div class="muted">sessions today</div><div class="big" id="sessions">–</div></div>
 <div class="card"><div class="muted">screen views today</div><div class="big" id="views">–</div></div>
 <div class="card"><div class="muted">bounce rate today</div><div class="big" id="bounce">–</div></div>
 <div class="card"><div class="muted">events written by workers</div><div class="big" id="written">–</div></div>
 <div class="card"><div class="muted">JetStream consumer lag</div><div class="big" id="lag">–</div></div>
</div>
<h2>Top pages today</h2><table id="pages"><tr><th>path</th><th>sessions</th><th>bounce %</th></tr></table>
<script>
const $ = (id) => document.getElementById(id);
let timer;
$('f').onsubmit = (e) => { e.preventDefault(); clearInterval(timer); poll(); timer = setInterval(poll, 2000); };
async function getJson(url, headers) { const r = await fetch(url, { headers }); if (!r.ok) throw new Error(url + ': ' + r.status + ' ' + (await r.text())); return r.json(); }
function sumMetric(text, name) { let t = 0; for (const l of text.split('\\n')) if (l.startsWith(name) && !l.startsWith('#')) t += Number(l.split(' ').pop()); return t; }
async function poll() {
  const p = encodeURIComponent($('p').value), h = { 'service-client-id': $('i').value, 'service-client-secret': $('s').value };
  try {
    const [live, m, pages, prom] = await Promise.all([
      getJson('/insights/' + p + '/live', h), getJson('/insights/' + p + '/metrics?range=today', h),
      getJson('/insights/' + p + '/pages?range=today&limit=10', h), fetch('/metrics').then((r) => r.text()),
    ]);
    $('live').textContent = live.visitors; $('sessions').textContent = m.metrics.total_sessions;
    $('views').textContent = m.metrics.total_screen_views; $('bounce').textContent = m.metrics.bounce_rate + '%';
    $('written').textContent = sumMetric(prom, 'tidemark_worker_events_total'); $('lag').textContent = sumMetric(prom, 'tidemark_jetstream_consumer_lag');
    $('pages').innerHTML = '<tr><th>path</th><th>sessions</th><th>bounce %</th></tr>' + pages.map((r) =>
      '<tr><td>' + (r.origin + r.path).replace(/</g, '&lt;') + '</td><td>' + r.sessions + '</td><td>' + r.bounce_rate + '</td></tr>').join('');
    $('err').textContent = '';
  } catch (e) { $('err').textContent = e.message; }
}
</script></body></html>`;
