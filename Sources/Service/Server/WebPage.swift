/// The service's web page: the newest frame and the newest photo, the last bracket side by side,
/// each timelapse job's progress with its keogram and buttons to pause, resume or stop it, the
/// triggers' counts, the status with the disk, and buttons to capture. Plain HTML and a little
/// JavaScript, no build step; the token, when the service has one, is asked for once and kept
/// in the browser's session storage, and pictures are fetched with it.
enum WebPage {
    static let html = """
    <!doctype html>
    <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Shutterbug</title>
    <style>
    body { font: 15px system-ui, sans-serif; margin: 0; background: #1d1d1f; color: #eee; }
    header { padding: 12px 20px; background: #2b2b2e; display: flex; gap: 16px; align-items: baseline; }
    h1 { font-size: 18px; margin: 0; } h2 { font-size: 16px; margin: 18px 0 8px; }
    main { display: grid; grid-template-columns: minmax(320px, 3fr) minmax(280px, 2fr); gap: 20px; padding: 0 20px 20px; }
    img { background: #000; border-radius: 6px; max-width: 100%; } #frame, #photo-img { width: 100%; max-height: 440px; object-fit: contain; }
    .strip { display: flex; gap: 6px; } .strip img { width: 0; flex: 1; } .keogram { width: 100%; height: 90px; image-rendering: pixelated; }
    table { border-collapse: collapse; width: 100%; } td { padding: 3px 6px; border-bottom: 1px solid #333; } td:first-child { color: #aaa; }
    button { font: inherit; padding: 5px 12px; border-radius: 6px; border: 0; background: #0a84ff; color: #fff; cursor: pointer; }
    button.quiet { background: #444; } a { color: #6cb4ff; } .error { color: #ff6b6b; } ul { padding-left: 18px; margin: 0; }
    .job { background: #2b2b2e; border-radius: 8px; padding: 10px 12px; margin-bottom: 10px; }
    progress { width: 100%; height: 10px; } .muted { color: #999; font-size: 13px; }
    </style></head><body>
    <header><h1>Shutterbug</h1><span id="camera"></span><span id="error" class="error"></span>
    <form id="token-form" hidden><label>This camera needs its token: <input id="token-input" type="password" autocomplete="current-password" size="28"></label> <button>Use it</button></form></header>
    <main>
    <section>
      <h2>Now</h2><img id="frame" alt="the newest frame">
      <p><button id="photo">Photo</button> <button id="bracket">Bracket −2, 0, +2 EV</button> <span id="busy"></span></p>
      <h2>Newest photo <span id="photo-name" class="muted"></span></h2><img id="photo-img" alt="no photo yet">
      <h2>Last bracket <span id="bracket-name" class="muted"></span></h2><div id="bracket-strip" class="strip"></div>
    </section>
    <section>
      <h2>Timelapse jobs</h2><div id="jobs"><p class="muted">none</p></div>
      <h2>Triggers</h2><table id="triggers"></table>
      <h2>Status</h2><table id="status"></table>
      <h2>Captures</h2><ul id="captures"></ul>
    </section>
    </main>
    <script>
    // The token, when the service has one: asked for in the page's own form (one question
    // however many calls were refused at once), kept for this tab in session storage, sent as
    // the bearer header, never put in a URL.
    let token = sessionStorage.getItem('token');
    let asking = null;
    function askToken() {
      if (!asking) asking = new Promise(resolve => {
        const form = document.getElementById('token-form'), input = document.getElementById('token-input');
        form.hidden = false; input.focus();
        form.onsubmit = event => {
          event.preventDefault();
          token = input.value.trim();
          if (token) sessionStorage.setItem('token', token); else sessionStorage.removeItem('token');
          form.hidden = true; input.value = ''; asking = null;
          resolve(token);
        };
      });
      return asking;
    }
    async function call(path, options = {}, retried = false) {
      const headers = Object.assign({}, options.headers, token ? {Authorization: 'Bearer ' + token} : {});
      const r = await fetch(path, Object.assign({}, options, {headers}));
      if (r.status === 401 && !retried) {
        document.getElementById('error').textContent = token ? 'that token was refused' : 'this camera needs its token';
        await askToken();
        return call(path, options, true);
      }
      if (!r.ok) { const e = await r.json().catch(() => ({error: r.statusText})); throw new Error(e.error); }
      return r;
    }
    function row(k, v) { return '<tr><td>' + k + '</td><td>' + (v ?? '–') + '</td></tr>'; }
    function esc(s) { return String(s).replace(/[&<>"]/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c])); }
    const shown = new Map();
    // A picture fetched with the token; fetched again only when its path or version changes.
    async function picture(img, path, version = '') {
      const key = path + '#' + version;
      if (shown.get(img) === key) return;
      const blob = await (await call(path)).blob();
      const old = img.src; img.src = URL.createObjectURL(blob); if (old.startsWith('blob:')) URL.revokeObjectURL(old);
      shown.set(img, key);
    }
    const file = f => '/api/files/' + f.split('/').map(encodeURIComponent).join('/');
    const jpegs = files => files.filter(f => f.endsWith('.jpg') && !f.endsWith('_sheet.jpg')).sort();
    async function control(name, action) {
      try { await call('/api/jobs/' + encodeURIComponent(name) + '/' + action, {method: 'POST'}); } catch (e) { document.getElementById('error').textContent = e.message; }
      refresh();
    }
    async function refresh() {
      try {
        const s = await (await call('/api/status')).json();
        document.getElementById('camera').textContent = s.camera + ' (' + s.model + ')' + (s.streaming ? '' : ' — ' + (s.problem || 'not streaming'));
        document.getElementById('status').innerHTML = row('frame', s.newestFrame) + row('exposure', s.exposureUs && (s.exposureUs / 1000).toFixed(2) + ' ms')
          + row('gain', s.analogueGain && s.analogueGain.toFixed(2)) + row('lux', s.lux && s.lux.toFixed(1))
          + row('sensor', s.sensorTemperatureC && s.sensorTemperatureC + ' °C') + row('captures', s.capturesTaken + (s.captureFailures ? ' (' + s.captureFailures + ' failed)' : ''))
          + row('disk free', s.diskFreeBytes && (s.diskFreeBytes / 1e9).toFixed(1) + ' GB') + row('written', (s.bytesWritten / 1e6).toFixed(1) + ' MB');
        // Captures over the API and the triggers', and the jobs' slots: the newest of all.
        const shots = [];
        if (s.lastCapture) shots.push({name: s.lastCapture.kind, files: s.lastCapture.files, steps: s.lastCapture.steps});
        for (const t of s.triggers) if (t.lastCapture) shots.push({name: 'trigger ' + t.name, files: t.lastCapture.files, steps: t.lastCapture.steps});
        for (const j of s.jobs) if (j.lastSlot && j.lastSlot.files.length) shots.push({name: j.name + ' slot ' + j.lastSlot.slot, files: j.lastSlot.files, steps: j.lastSlot.frames.length});
        const stamp = f => f.split('/').pop();
        shots.sort((a, b) => (jpegs(b.files)[0] ? stamp(jpegs(b.files)[0]) : '').localeCompare(jpegs(a.files)[0] ? stamp(jpegs(a.files)[0]) : ''));
        const newest = shots.find(x => jpegs(x.files).length);
        if (newest) {
          const j = jpegs(newest.files); const mid = j[Math.floor(j.length / 2)];
          document.getElementById('photo-name').textContent = newest.name + ' · ' + stamp(mid);
          await picture(document.getElementById('photo-img'), file(mid));
        }
        const bracket = shots.find(x => x.steps > 1 && jpegs(x.files).length > 1);
        if (bracket) {
          const strip = document.getElementById('bracket-strip'), list = jpegs(bracket.files);
          document.getElementById('bracket-name').textContent = bracket.name + ' · ' + list.length + ' steps';
          if (strip.dataset.key !== list.join()) { strip.innerHTML = list.map(() => '<img alt="a step">').join(''); strip.dataset.key = list.join(); }
          await Promise.all(list.map((f, i) => picture(strip.children[i], file(f))));
        }
        const jobs = document.getElementById('jobs');
        if (s.jobs.length) {
          const key = s.jobs.map(j => j.name).join();
          if (jobs.dataset.key !== key) {
            jobs.innerHTML = s.jobs.map((j, i) => '<div class="job"><b>' + esc(j.name) + '</b> <span id="job-state-' + i + '"></span>'
              + '<progress id="job-progress-' + i + '"></progress><div id="job-line-' + i + '" class="muted"></div>'
              + '<img id="job-keogram-' + i + '" class="keogram" alt="the keogram appears after the first slot"><p>'
              + ['pause', 'resume', 'stop'].map(a => '<button class="quiet" data-job="' + esc(j.name) + '" data-action="' + a + '">' + a + '</button>').join(' ') + '</p></div>').join('');
            jobs.dataset.key = key;
            jobs.querySelectorAll('button').forEach(b => b.onclick = () => control(b.dataset.job, b.dataset.action));
          }
          for (const [i, j] of s.jobs.entries()) {
            const done = j.taken + j.skipped + j.missed + j.failed;
            document.getElementById('job-state-' + i).textContent = j.state + (j.message ? ' — ' + j.message : '');
            const bar = document.getElementById('job-progress-' + i);
            if (j.total) { bar.max = j.total; bar.value = (j.nextSlot ?? j.total); } else { bar.removeAttribute('value'); }
            document.getElementById('job-line-' + i).textContent = (j.nextSlot != null ? 'slot ' + j.nextSlot + (j.total ? ' of ' + j.total : '') + ' next at ' + j.nextSlotAt.replace('T', ' ').replace(/\\.\\d+Z$/, 'Z') + ' · ' : '')
              + j.taken + ' taken, ' + j.skipped + ' skipped, ' + j.failed + ' failed this run'
              + (j.scheduleErrorP99Us != null ? ' · slot error p99 ' + (Math.abs(j.scheduleErrorP99Us) < 1000 ? j.scheduleErrorP99Us.toFixed(1) + ' µs' : (j.scheduleErrorP99Us / 1000).toFixed(1) + ' ms') : '');
            // Only what the job can do now: nothing once it is over or stopping.
            const over = ['stopped', 'finished', 'failed', 'stopping'].includes(j.state);
            for (const b of jobs.children[i].querySelectorAll('button'))
              b.hidden = over || (b.dataset.action === 'pause' && j.state === 'paused') || (b.dataset.action === 'resume' && j.state !== 'paused');
            if (j.keogram) await picture(document.getElementById('job-keogram-' + i), file(j.keogram), j.taken);
          }
        }
        document.getElementById('triggers').innerHTML = s.triggers.length ? s.triggers.map(t => row(esc(t.name) + ' <span class="muted">' + esc(t.source || '') + '</span>',
          t.seen + ' seen, ' + t.captured + ' captured, ' + (t.dropped + t.coalesced) + ' dropped' + (t.lagToExposureStart ? ' · lag p50 ' + (t.lagToExposureStart.p50Us / 1000).toFixed(1) + ' ms' : ''))).join('') : row('none', '');
        const c = await (await call('/api/captures')).json();
        // Downloads go through call() too, so they carry the token (a plain link would not).
        const list = document.getElementById('captures');
        list.innerHTML = c.map(x => '<li>' + esc(x.kind) + (x.partial ? ' (partial)' : '') + ': ' + x.files.map(f => '<a href="#" data-file="' + esc(f) + '">' + esc(f.split('/').pop()) + '</a>').join(', ') + '</li>').join('');
        list.querySelectorAll('a[data-file]').forEach(a => a.onclick = async event => {
          event.preventDefault();
          try {
            const blob = await (await call(file(a.dataset.file))).blob();
            const save = document.createElement('a');
            save.href = URL.createObjectURL(blob); save.download = a.dataset.file.split('/').pop(); save.click();
            setTimeout(() => URL.revokeObjectURL(save.href), 60000);
          } catch (e) { document.getElementById('error').textContent = e.message; }
        });
        const img = await (await call('/api/frame.jpg')).blob();
        const old = document.getElementById('frame').src; document.getElementById('frame').src = URL.createObjectURL(img); if (old) URL.revokeObjectURL(old);
        document.getElementById('error').textContent = '';
      } catch (e) { document.getElementById('error').textContent = e.message; }
    }
    async function capture(body) {
      document.getElementById('busy').textContent = 'capturing…';
      try { await call('/api/capture', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)}); }
      catch (e) { document.getElementById('error').textContent = e.message; }
      document.getElementById('busy').textContent = ''; refresh();
    }
    document.getElementById('photo').onclick = () => capture({});
    document.getElementById('bracket').onclick = () => capture({ev: [-2, 0, 2]});
    refresh(); setInterval(refresh, 3000);
    </script></body></html>
    """
}
