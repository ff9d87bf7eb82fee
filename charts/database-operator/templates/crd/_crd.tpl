{{- /*
A CRD of the operator from the chart's files/: byte-for-byte copies of manifests/crd/ (generated
by `database-operator crd`, written by hack/generate-crds.sh; tests/chart.rs checks the copies).
They are templates rather than files in crds/ because Helm never templates, upgrades or skips
what is in crds/, and this chart must do all three: add the keep annotation, upgrade the schema
with the operator, and leave the CRDs out when crds.install is false.
*/}}
{{- define "database-operator.crd" -}}
{{- $root := index . 0 }}
{{- $file := index . 1 }}
{{- $crd := $root.Files.Get $file | fromYaml }}
{{- if not $crd }}
{{- fail (printf "%s is missing from the chart: run hack/generate-crds.sh" $file) }}
{{- end }}
{{- if hasKey $crd "Error" }}
{{- fail (printf "%s is not valid YAML: %s" $file $crd.Error) }}
{{- end }}
{{- $metadata := $crd.metadata }}
{{- $_ := set $metadata "labels" (merge (include "database-operator.helmLabels" $root | fromYaml) ($metadata.labels | default dict)) }}
{{- if $root.Values.crds.keep }}
{{- /* Deleting a CRD deletes every object of its kind in the cluster: `helm uninstall` must not. */}}
{{- $_ := set $metadata "annotations" (merge (dict "helm.sh/resource-policy" "keep") ($metadata.annotations | default dict)) }}
{{- end }}
{{ toYaml $crd }}
{{- end }}
