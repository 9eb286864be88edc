{{/* The image of every kovn container. */}}
{{- define "kovn.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end }}

{{/* OVN endpoints, comma-separated, from ovnCentral.addresses or the explicit endpoints. */}}
{{- define "kovn.endpoints" -}}
{{- $root := index . 0 -}}{{- $port := index . 1 -}}{{- $explicit := index . 2 -}}
{{- if $root.Values.ovnCentral.enabled -}}
{{- $eps := list -}}
{{- $scheme := ternary "tcp" "ssl" (toString $root.Values.ovnCentral.insecurePlainTCP | eq "true") -}}
{{- range $root.Values.ovnCentral.addresses -}}
{{- $eps = append $eps (printf "%s:%s:%d" $scheme (include "kovn.hostPort" .) (int $port)) -}}
{{- end -}}
{{ join "," $eps }}
{{- else -}}
{{ $explicit }}
{{- end -}}
{{- end }}

{{/* An IPv6 address in brackets, as OVSDB endpoints want it. */}}
{{- define "kovn.hostPort" -}}
{{- if contains ":" . -}}[{{ . }}]{{- else -}}{{ . }}{{- end -}}
{{- end }}

{{/* "true" when OVN central (the chart's own) serves mutual TLS. */}}
{{- define "kovn.ovnTLS" -}}
{{- if and .Values.ovnCentral.enabled (not .Values.ovnCentral.insecurePlainTCP) -}}true{{- end -}}
{{- end }}

{{/* The TLS files of the OVN central certificate, for OVS daemons' options (-p -c -C). */}}
{{- define "kovn.ovnTLSArgs" -}}
--private-key=/etc/kovn/ovn-tls/tls.key, --certificate=/etc/kovn/ovn-tls/tls.crt, --ca-cert=/etc/kovn/ovn-tls/ca.crt
{{- end }}

{{- define "kovn.nbEndpoints" -}}
{{ include "kovn.endpoints" (list . .Values.ovnCentral.nbPort .Values.ovnCentral.nbEndpoints) }}
{{- end }}

{{- define "kovn.sbEndpoints" -}}
{{ include "kovn.endpoints" (list . .Values.ovnCentral.sbPort .Values.ovnCentral.sbEndpoints) }}
{{- end }}

{{/* Checks that make a bad install fail at render time with a reason, not at run time. */}}
{{- define "kovn.validate" -}}
{{- if ne .Release.Namespace "kube-system" -}}
{{- fail (printf "install kovn into kube-system (its admission policies name kube-system's service accounts), not %q" .Release.Namespace) -}}
{{- end -}}
{{- if and .Values.ovnCentral.enabled (not .Values.ovnCentral.addresses) -}}
{{- fail "ovnCentral.addresses: list the node IPs of the OVN central nodes (labelled by ovnCentral.nodeSelector)" -}}
{{- end -}}
{{- if and (not .Values.ovnCentral.enabled) (or (not .Values.ovnCentral.nbEndpoints) (not .Values.ovnCentral.sbEndpoints)) -}}
{{- fail "ovnCentral.enabled is false: set ovnCentral.nbEndpoints and ovnCentral.sbEndpoints to your OVN central" -}}
{{- end -}}
{{- if not (has .Values.ovs.datapath (list "system" "netdev")) -}}
{{- fail (printf "ovs.datapath is system or netdev, not %q" .Values.ovs.datapath) -}}
{{- end -}}
{{- if and .Values.interconnect.databases.enabled (not .Values.ovnCentral.enabled) -}}
{{- fail "interconnect.databases runs on the OVN central nodes: it needs ovnCentral.enabled" -}}
{{- end -}}
{{- if .Values.interconnect.enabled -}}
{{- if not .Values.interconnect.azName -}}{{- fail "interconnect.azName: name this cluster's availability zone" -}}{{- end -}}
{{- if or (not .Values.interconnect.icNorthbound) (not .Values.interconnect.icSouthbound) -}}
{{- fail "interconnect: set icNorthbound and icSouthbound (ssl:IP:PORT of the OVN-IC databases)" -}}
{{- end -}}
{{- range (concat .Values.interconnect.icNorthbound .Values.interconnect.icSouthbound) -}}
{{- if and (not (hasPrefix "ssl:" .)) (not $.Values.interconnect.insecurePlainTCP) -}}
{{- fail (printf "interconnect: %s is not ssl: (anyone reaching a tcp: IC database can rewrite the clusterset); set interconnect.insecurePlainTCP=true to allow it anyway" .) -}}
{{- end -}}
{{- end -}}
{{- if and (not .Values.interconnect.gatewayNodes) (not .Values.interconnect.gatewaySelector) -}}
{{- fail "interconnect: name gatewayNodes or a gatewaySelector" -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* Env entries that point a kovn process at the apiserver's real address, if one is set. */}}
{{- define "kovn.apiServerEnv" -}}
{{- with .Values.apiServer.host -}}
- {name: KUBERNETES_SERVICE_HOST, value: {{ . | quote }}}
- {name: KUBERNETES_SERVICE_PORT, value: {{ $.Values.apiServer.port | quote }}}
{{- end -}}
{{- end }}
