// The cronlog console's only script (no inline scripts: the CSP forbids them).
// Remembers the viewer's time zone for the server-rendered times, and asks before
// submitting a form marked data-confirm.
(function () {
  try {
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (zone) {
      document.cookie = "cronlog_tz=" + encodeURIComponent(zone) + "; path=/; SameSite=Strict; max-age=31536000";
    }
  } catch (e) { /* the server falls back to UTC */ }
  document.addEventListener("submit", function (event) {
    var question = event.target.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });
})();
