// Search from file://. Material's search runs in a Web Worker, and browsers refuse to start a
// worker from a file:// page. On such a page only, this replaces `Worker` by one that runs the
// worker script in a hidden same-origin iframe and passes messages between the two windows, so
// the search box works on a site opened from disk. Over http(s) it does nothing.
// (The file name contains "iframe-worker" so that Material's offline plugin does not add its own
// shim from a CDN.)
(function () {
  "use strict";
  if (typeof window === "undefined" || window.location.protocol !== "file:") {
    return;
  }

  function FrameWorker(url) {
    var worker = this;
    var listeners = { message: [], error: [] };
    var queue = [];
    var ready = false;
    this.onmessage = null;
    this.onerror = null;

    function emit(type, event) {
      var handler = type === "message" ? worker.onmessage : worker.onerror;
      if (typeof handler === "function") {
        handler.call(worker, event);
      }
      listeners[type].slice().forEach(function (listener) {
        listener.call(worker, event);
      });
    }

    var frame = document.createElement("iframe");
    frame.hidden = true;
    frame.setAttribute("aria-hidden", "true");
    frame.setAttribute("tabindex", "-1");
    (document.body || document.documentElement).appendChild(frame);
    var scope = frame.contentWindow;

    // the worker's postMessage answers the page
    scope.postMessage = function (data) {
      window.setTimeout(function () {
        emit("message", new MessageEvent("message", { data: data }));
      }, 0);
    };
    scope.importScripts = function () {
      throw new Error("importScripts is not available to a worker run from file://");
    };

    function deliver(data) {
      window.setTimeout(function () {
        scope.dispatchEvent(new scope.MessageEvent("message", { data: data }));
      }, 0);
    }

    this._deliver = function (data) {
      if (ready) {
        deliver(data);
      } else {
        queue.push(data);
      }
    };
    this._listeners = listeners;
    this._frame = frame;

    var script = scope.document.createElement("script");
    script.src = new URL(url, window.location.href).href;
    script.onload = function () {
      ready = true;
      queue.splice(0).forEach(deliver);
    };
    script.onerror = function () {
      emit("error", new ErrorEvent("error", { message: "cannot load worker " + script.src }));
    };
    scope.document.head.appendChild(script);
  }

  FrameWorker.prototype.postMessage = function (data) {
    this._deliver(data);
  };
  FrameWorker.prototype.addEventListener = function (type, listener) {
    if (this._listeners[type] && this._listeners[type].indexOf(listener) < 0) {
      this._listeners[type].push(listener);
    }
  };
  FrameWorker.prototype.removeEventListener = function (type, listener) {
    var list = this._listeners[type] || [];
    var at = list.indexOf(listener);
    if (at >= 0) {
      list.splice(at, 1);
    }
  };
  FrameWorker.prototype.terminate = function () {
    if (this._frame.parentNode) {
      this._frame.parentNode.removeChild(this._frame);
    }
  };

  window.Worker = FrameWorker;
})();
