// agentledger's sign-in page: the token (from the URL's fragment, which no
// server ever sees, or typed in) is traded for a session cookie, then the
// fragment is dropped from the address bar and history and the browser goes on.
"use strict";

function nextPath() {
  const next = new URLSearchParams(location.search).get("next") || "/";
  return next.startsWith("/") && !next.startsWith("//") && !next.includes("\\") ? next : "/";
}

async function signIn(token) {
  const notice = document.getElementById("notice");
  const reply = await fetch("/api/signin", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ token }), credentials: "same-origin",
  });
  if (reply.ok) { location.replace(nextPath()); return; }
  const body = await reply.json().catch(() => ({ message: reply.statusText }));
  notice.textContent = `sign-in refused: ${body.message}`;
  notice.className = "error";
}

const fragment = new URLSearchParams(location.hash.slice(1)).get("token");
history.replaceState(null, "", location.pathname + location.search);  // the token leaves the address bar
document.getElementById("signin").addEventListener("submit", (e) => {
  e.preventDefault();
  signIn(document.getElementById("token").value.trim());
});
if (fragment) signIn(fragment);
