/// The service's web page: the newest frame, the status, the last captures with their files,
/// and a button to capture. Plain HTML and a little JavaScript, no build step; the token, when
/// the service has one, is asked for once and kept in the browser's session storage.
enum WebPage {
    static let html = """
    <!doctype html>
    <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Shutterbug</title>
    <style>
    body { font: 15px system-ui, sans-serif; margin: 0; background: #1d1d1f; color: #eee; }
    header { padding: 12px 20px; background: #2b2b2e; display: flex; gap: 16px; align-items: baseline; }
    h1 { font-size: 18px; margin: 0; } main { display: grid; grid-template-columns: minmax(320px, 2fr) 1fr; gap: 20px; padding: 20px; }
    img#frame { width: 100%; background: #000; border-radius: 6px; } table { border-collapse: collapse; width: 100%; }
    td { padding: 3px 6px; border-bottom: 1px solid #333; } td:first-child { color: #aaa; }
    button { font: inherit; padding: 6px 14px; border-radius: 6px; border: 0; background: #0a84ff; color: #fff; cursor: pointer; }
    a { color: #6cb4ff; } .error { color: #ff6b6b; } ul { padding-left: 18px; }
    </style></head><body>
    <header><h1>Shutterbug</h1><span id="camera"></span><span id="error" class="error"></span></header>
    <main>
    <section><img id="frame" alt="the newest frame"><p>
    <button id="photo">Photo</button> <button id="bracket">Bracket −2, 0, +2 EV</button> <span id="busy"></span></p></section>
    <section><h2>Status</h2><table id="status"></table><h2>Captures</h2><ul id="captures"></ul></section>
    </main>
    <script>
    let token = sessionStorage.getItem('token');
    async function call(path, options = {}) {
      options.headers = Object.assign({}, options.headers, token ? {Authorization: 'Bearer ' + token} : {});
      const r = await fetch(path, options);
      if (r.status === 401) { token = prompt('Token'); sessionStorage.setItem('token', token || ''); return call(path, options); }
      if (!r.ok) { const e = await r.json().catch(() => ({error: r.statusText})); throw new Error(e.error); }
      return r;
    }
    function row(k, v) { return '<tr><td>' + k + '</td><td>' + (v ?? '–') + '</td></tr>'; }
    function esc(s) { return String(s).replace(/[&<>"]/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c])); }
    async function refresh() {
      try {
        const s = await (await call('/api/status')).json();
        document.getElementById('camera').textContent = s.camera + ' (' + s.model + ')' + (s.streaming ? '' : ' — not streaming');
        document.getElementById('status').innerHTML = row('frame', s.newestFrame) + row('exposure', s.exposureUs && (s.exposureUs / 1000).toFixed(2) + ' ms')
          + row('gain', s.analogueGain && s.analogueGain.toFixed(2)) + row('lux', s.lux && s.lux.toFixed(1))
          + row('sensor', s.sensorTemperatureC && s.sensorTemperatureC + ' °C') + row('captures', s.capturesTaken + (s.captureFailures ? ' (' + s.captureFailures + ' failed)' : ''))
          + row('disk free', s.diskFreeBytes && (s.diskFreeBytes / 1e9).toFixed(1) + ' GB') + row('written', (s.bytesWritten / 1e6).toFixed(1) + ' MB');
        const c = await (await call('/api/captures')).json();
        document.getElementById('captures').innerHTML = c.map(x => '<li>' + esc(x.kind) + ': ' + x.files.map(f => '<a href="/api/files/' + encodeURI(f) + '">' + esc(f.split('/').pop()) + '</a>').join(', ') + '</li>').join('');
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
