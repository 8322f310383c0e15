// Live refresh for the freehours console: a page whose <main> has data-refresh="N" is read again
// every N seconds and its <main> replaced, unless the operator is typing in a form on it or has
// paused it. Without this script every page works as it is; it only saves pressing reload.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var status = document.getElementById("live-status");
  if (!main || !main.dataset.refresh) { return; }
  var seconds = Math.max(5, parseInt(main.dataset.refresh, 10) || 10);
  var paused = false;
  var button = document.createElement("button");
  button.type = "button";
  button.className = "link";
  button.textContent = "Pause live refresh";
  button.setAttribute("aria-pressed", "false");
  button.addEventListener("click", function () {
    paused = !paused;
    button.setAttribute("aria-pressed", paused ? "true" : "false");
    button.textContent = paused ? "Resume live refresh" : "Pause live refresh";
  });
  if (status && status.parentNode) { status.parentNode.appendChild(button); }

  function busy() {
    var active = document.activeElement;
    return active && main.contains(active) && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName);
  }

  function refresh() {
    if (paused || busy() || document.hidden) { return; }
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (!response.ok || response.redirected) { throw new Error(String(response.status)); }
        return response.text();
      })
      .then(function (html) {
        var page = new DOMParser().parseFromString(html, "text/html");
        var fresh = page.getElementById("main");
        if (fresh && !busy()) {
          main.innerHTML = fresh.innerHTML;
          if (status) { status.textContent = "Updated " + new Date().toLocaleTimeString(); }
        }
      })
      .catch(function (error) {
        if (status) { status.textContent = "Live refresh failed (" + error.message + "); retrying"; }
      });
  }
  window.setInterval(refresh, seconds * 1000);
})();
