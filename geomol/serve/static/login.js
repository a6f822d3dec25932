"use strict";
// Show "wrong token" after a failed attempt (the server redirects to /login?wrong=1).
if (new URLSearchParams(window.location.search).has("wrong")) {
  document.getElementById("wrong").hidden = false;
}
