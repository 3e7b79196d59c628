// The page's script: Microsoft's SARIF viewer component (the React component that
// https://microsoft.github.io/sarif-web-component/ shows), rendered by
// `window.renderSarif(log)`. view.mjs bundles it with esbuild and injects the log.
import * as React from "react";
import * as ReactDOM from "react-dom";
import { Viewer } from "@microsoft/sarif-web-component";

window.renderSarif = (log) => {
  const root = document.getElementById("root");
  ReactDOM.unmountComponentAtNode(root);
  ReactDOM.render(React.createElement(Viewer, { logs: [log] }), root);
};
