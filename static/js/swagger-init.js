// Start Swagger UI on /docs from a file, not inline script, so the page keeps the site's Content-Security-Policy.
(function () {
  "use strict";
  var root = document.getElementById("swagger-ui");
  window.ui = window.SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [window.SwaggerUIBundle.presets.apis, window.SwaggerUIBundle.SwaggerUIStandalonePreset].filter(Boolean),
    layout: "BaseLayout",
    // The API signs in with the session cookie; requests from the explorer carry it (and need X-CSRF-Token).
    withCredentials: true,
  });
})();
