// Validates the Prometheus Operator resources of deploy/k8s (ServiceMonitor, PrometheusRule)
// against the CRD schemas that @kubernetes-models/prometheus-operator is generated from
// (kubernetes-validate knows only the built-in kinds). Other kinds are skipped: they are
// kubernetes-validate's. deploy/check.sh copies this file beside the node_modules it
// installs from package-lock.json and runs it there:
//   node ~/.cache/casement/tools/deploy/node/crds.mjs FILE.yaml...
// Exit 1 when a resource does not validate; prints one line per resource checked.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import {
  PrometheusRule,
  ServiceMonitor,
} from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";

const models = { ServiceMonitor, PrometheusRule };

let failed = 0;
let checked = 0;
for (const file of process.argv.slice(2)) {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (doc.errors.length > 0) {
      console.error(`ERROR ${file}: ${doc.errors[0].message}`);
      failed += 1;
      continue;
    }
    const object = doc.toJS();
    if (object?.apiVersion !== "monitoring.coreos.com/v1") continue;
    const Model = models[object.kind];
    const name = `${object.kind}/${object.metadata?.name}`;
    if (!Model) {
      console.error(`ERROR ${file}: ${name}: no schema known for this kind`);
      failed += 1;
      continue;
    }
    checked += 1;
    try {
      new Model(object).validate();
      console.log(`ok    ${file}: ${name}`);
    } catch (error) {
      failed += 1;
      console.error(`ERROR ${file}: ${name}: ${error.message}`);
    }
  }
}
if (checked === 0) {
  console.error("no ServiceMonitor or PrometheusRule found");
  process.exit(1);
}
process.exit(failed > 0 ? 1 : 0);
