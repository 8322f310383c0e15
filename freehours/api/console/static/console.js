// The freehours console's one script. Without it every page works as it is.
//
// A table wider than the screen scrolls in its <div class="scroll">: such a box is made a tab
// stop (a region named after its table) so that it can be scrolled from the keyboard, and only
// while it does overflow, so that a laptop's Tab does not stop at every table.
//
// Live refresh: a page whose <main> has data-refresh="N" is read again every N seconds and its
// <main> replaced, unless the operator is typing in a form on it or has paused it; it only saves
// pressing reload.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var status = document.getElementById("live-status");

  function nameOf(box) {
    var caption = box.querySelector("caption");
    if (caption) { return caption.textContent.trim(); }
    var section = box.closest("section[aria-labelledby]");
    var heading = section && document.getElementById(section.getAttribute("aria-labelledby"));
    if (!heading) { heading = document.querySelector("main h1"); }
    return heading ? heading.textContent.trim() : "Table";
  }

  function markScrolling() {
    var boxes = document.querySelectorAll(".scroll");
    for (var i = 0; i < boxes.length; i++) {
      var box = boxes[i];
      if (box.scrollWidth > box.clientWidth + 1) {
        box.setAttribute("tabindex", "0");
        box.setAttribute("role", "region");
        box.setAttribute("aria-label", nameOf(box) + " (scrolls sideways)");
      } else if (box.hasAttribute("tabindex")) {
        box.removeAttribute("tabindex");
        box.removeAttribute("role");
        box.removeAttribute("aria-label");
      }
    }
  }
  markScrolling();
  window.addEventListener("resize", markScrolling);

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
          markScrolling();
          if (status) { status.textContent = "Updated " + new Date().toLocaleTimeString(); }
        }
      })
      .catch(function (error) {
        if (status) { status.textContent = "Live refresh failed (" + error.message + "); retrying"; }
      });
  }
  window.setInterval(refresh, seconds * 1000);
})();
