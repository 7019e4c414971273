// Sidekiq's queue page, loaded by Sidekiq::FairTenant::Web::WhyLinks: each job row gets a "why?" link to
// <root>/fair_tenant/why?jid=<jid>. The jid comes from the row's job JSON (its Delete form's key_val);
// nothing from a job is ever parsed as HTML.
(function () {
  "use strict";

  var script = document.currentScript;
  if (!script || !window.URL || !window.JSON) return;
  var why = new URL("why", script.src);

  function jidOf(input) {
    try {
      var job = JSON.parse(input.value);
      return job && typeof job.jid === "string" && job.jid !== "" ? job.jid : null;
    } catch (e) {
      return null;
    }
  }

  var inputs = document.querySelectorAll('tr input[name="key_val"]');
  for (var i = 0; i < inputs.length; i++) {
    var jid = jidOf(inputs[i]);
    var cell = inputs[i].form && inputs[i].form.parentNode;
    if (!jid || !cell) continue;

    var link = document.createElement("a");
    link.className = "fair-tenant-why";
    link.href = why.pathname + "?jid=" + encodeURIComponent(jid);
    link.title = "Why is this job still waiting?";
    link.textContent = "why?";
    cell.appendChild(link);
  }
})();
