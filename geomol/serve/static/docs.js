"use strict";
// Swagger UI (from the swagger-ui-bundle package, served by this server) on this server's OpenAPI document.
if (window.SwaggerUIBundle) {
  window.SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger" });
}
