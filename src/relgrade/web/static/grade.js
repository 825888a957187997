// relgrade grading page: keyboard use, word counter, and a local draft of the open batch.
(function () {
  "use strict";
  var form = document.getElementById("batch-form");
  if (!form) { return; }
  var chunks = Array.prototype.slice.call(document.querySelectorAll("article.chunk"));
  var maxWords = parseInt(form.getAttribute("data-max-words"), 10) || 15;
  var maxChars = parseInt(form.getAttribute("data-max-chars"), 10) || 300;
  var draftKey = "relgrade-draft:" + form.getAttribute("data-draft");
  var current = 0;

  function words(text) {
    var t = text.trim();
    return t ? t.split(/\s+/).length : 0;
  }

  function updateCounter(i) {
    var box = document.getElementById("reason-" + i);
    var counter = document.getElementById("counter-" + i);
    if (!box || !counter) { return; }
    // every chunk's box is checked, against both limits the server applies
    var n = words(box.value);
    var chars = box.value.length;
    var over = n > maxWords || chars > maxChars;
    counter.textContent = n + " / " + maxWords + " words" +
      (chars > maxChars ? " · " + chars + " / " + maxChars + " characters" : "");
    counter.classList.toggle("over", over);
    box.classList.toggle("over", over);
    if (over) {
      box.setAttribute("aria-invalid", "true");
    } else if (!chunks[i].classList.contains("has-error")) {
      box.removeAttribute("aria-invalid");
    }
  }

  function setCurrent(i, scroll) {
    if (i < 0 || i >= chunks.length) { return; }
    chunks.forEach(function (c) { c.classList.remove("current"); });
    current = i;
    chunks[i].classList.add("current");
    if (scroll !== false) {
      chunks[i].scrollIntoView({block: "nearest"});
      chunks[i].focus({preventScroll: true});
    }
  }

  function saveDraft() {
    var draft = {};
    chunks.forEach(function (c, i) {
      var box = document.getElementById("reason-" + i);
      var picked = form.querySelector('input[name="grade-' + i + '"]:checked');
      draft[i] = {reason: box ? box.value : "", grade: picked ? picked.value : ""};
    });
    try { window.localStorage.setItem(draftKey, JSON.stringify(draft)); } catch (e) { /* private mode */ }
  }

  function restoreDraft() {
    var draft = null;
    try { draft = JSON.parse(window.localStorage.getItem(draftKey) || "null"); } catch (e) { draft = null; }
    if (!draft) { return; }
    chunks.forEach(function (c, i) {
      var d = draft[i];
      var box = document.getElementById("reason-" + i);
      if (!d || !box || box.disabled) { return; }
      if (!box.value && d.reason) { box.value = d.reason; }
      var any = form.querySelector('input[name="grade-' + i + '"]:checked');
      if (!any && d.grade !== "") {
        var r = form.querySelector('input[name="grade-' + i + '"][value="' + d.grade + '"]');
        if (r) { r.checked = true; }
      }
    });
  }

  function grade(i, value) {
    var r = form.querySelector('input[name="grade-' + i + '"][value="' + value + '"]');
    if (r && !r.disabled) { r.checked = true; saveDraft(); }
  }

  chunks.forEach(function (c, i) {
    var box = document.getElementById("reason-" + i);
    if (box) {
      box.addEventListener("input", function () { updateCounter(i); saveDraft(); });
      box.addEventListener("focus", function () { setCurrent(i, false); });
    }
    c.addEventListener("click", function () { setCurrent(i, false); });
    c.addEventListener("change", saveDraft);
  });

  form.addEventListener("submit", function () {
    try { window.localStorage.removeItem(draftKey); } catch (e) { /* ignore */ }
  });

  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    var t = ev.target;
    if (t && t.closest && t.closest(".dispute")) { return; }  // the dispute form types freely
    if (t && t.tagName === "TEXTAREA") {
      if (ev.key === "Escape" || (ev.key === "Enter" && !ev.shiftKey)) {
        ev.preventDefault();
        t.blur();
        setCurrent(current);
      }
      return;
    }
    if (/^[0-9]$/.test(ev.key)) {
      ev.preventDefault();
      grade(current, ev.key);
    } else if (ev.key === "n" || ev.key === "j") {
      ev.preventDefault();
      setCurrent(current + 1);
    } else if (ev.key === "p" || ev.key === "k") {
      ev.preventDefault();
      setCurrent(current - 1);
    } else if (ev.key === "r") {
      var box = document.getElementById("reason-" + current);
      if (box && !box.disabled) { ev.preventDefault(); box.focus(); }
    } else if (ev.key === "Enter") {
      var save = document.getElementById("save");
      if (save) { ev.preventDefault(); form.requestSubmit ? form.requestSubmit(save) : form.submit(); }
    }
  });

  restoreDraft();
  chunks.forEach(function (c, i) { updateCounter(i); });
  var start = chunks.findIndex(function (c) { return c.classList.contains("has-error"); });
  if (start < 0) {
    start = chunks.findIndex(function (c, i) {
      return !c.classList.contains("saved") && !form.querySelector('input[name="grade-' + i + '"]:checked');
    });
  }
  setCurrent(start < 0 ? 0 : start, start > 0);
  document.body.setAttribute("data-ready", "1");
})();
